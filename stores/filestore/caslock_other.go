//go:build !unix

package filestore

import "os"

// On systems without flock(2), compare-and-swap is atomic only within one
// Store value (its in-process locks), not across processes.
func lockFolder(*os.File) error { return nil }

func unlockFolder(*os.File) {}

func tryLockFolder(*os.File) bool { return true }
