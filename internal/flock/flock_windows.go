//go:build windows

package flock

import (
	"errors"

	"golang.org/x/sys/windows"
)

// CrossProcess is true: the lock excludes every process of the machine.
const CrossProcess = true

func (l *File) init() error { return nil }

func (l *File) lockEx(flags uint32) error {
	var ol windows.Overlapped
	return windows.LockFileEx(windows.Handle(l.f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|flags, 0, 1, 0, &ol)
}

func (l *File) try() (bool, error) {
	err := l.lockEx(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return false, nil
	}
	return err == nil, err
}

func (l *File) block() error { return l.lockEx(0) }

func (l *File) unlock() error {
	var ol windows.Overlapped
	return windows.UnlockFileEx(windows.Handle(l.f.Fd()), 0, 1, 0, &ol)
}
