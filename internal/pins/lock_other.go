//go:build !unix

package pins

import "os"

// Without flock, processes sharing a state folder are not kept apart:
// there, use one process at a time per folder.
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
