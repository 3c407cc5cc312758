//go:build unix

package filestore

import (
	"errors"
	"os"
	"syscall"
)

// lockFolder takes the folder's compare-and-swap lock, an exclusive flock(2)
// on f, waiting for other processes that hold it. A process that dies, even
// by SIGKILL, releases it.
func lockFolder(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func unlockFolder(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}

// tryLockFolder takes an exclusive flock(2) on f without waiting.
func tryLockFolder(f *os.File) bool {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err == nil
		}
	}
}
