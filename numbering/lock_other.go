//go:build !unix && !windows

package numbering

import "os"

// lockFile on platforms without file locks only creates the file: passes
// are kept apart within the process, not across processes.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}

func unlockFile(f *os.File) { _ = f.Close() }
