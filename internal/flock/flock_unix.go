//go:build unix

package flock

import (
	"errors"
	"syscall"
)

// CrossProcess is true: the lock excludes every process of the machine.
const CrossProcess = true

func (l *File) init() error { return nil }

func (l *File) try() (bool, error) {
	err := flock(l.f.Fd(), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func (l *File) block() error { return flock(l.f.Fd(), syscall.LOCK_EX) }

func (l *File) unlock() error { return flock(l.f.Fd(), syscall.LOCK_UN) }

// flock is flock(2), retried when a signal interrupts it.
func flock(fd uintptr, how int) error {
	for {
		err := syscall.Flock(int(fd), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
