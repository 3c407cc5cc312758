// Package flock is noydb's one file lock: an exclusive lock on a file,
// shared by every process on the machine that opens the same file, and
// released by Unlock, by Close, or by the death of the process that holds
// it (even by SIGKILL), because the operating system ties it to the open
// file.
//
// On Unix-like systems the lock is flock(2) on the whole file; on Windows
// it is LockFileEx on the file's first byte. Elsewhere (CrossProcess is
// false there: js, wasip1, plan9) the lock keeps apart the Files of one
// process that lock the same path, and no more: other processes are not
// excluded.
//
// Two Files of one process on the same path exclude each other as two
// processes would. A File is for one holder at a time: its methods must not
// be called concurrently.
//
// Lock waits. Where the operating system can wait for a lock in a way a
// context can cancel, Lock uses it; flock(2) and LockFileEx on a
// synchronous handle cannot be cancelled, so Lock with a context that can
// end polls without waiting in the kernel, backing off from 50µs to 5ms
// between tries, and Lock with a context that never ends
// (context.Background) waits in the kernel. The in-process lock of other
// systems waits on a channel, and ctx cancels that wait.
package flock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/noydb-go/noydb/internal/poll"
)

// ErrHeld is returned by TryLock when another File holds the lock.
var ErrHeld = errors.New("flock: lock is held")

// File is an open lock file.
type File struct {
	path string
	f    *os.File
	held bool
	mem  *memLock // the in-process lock where the OS has none
}

// Open opens the lock file at path, creating it (mode 0600) when it is
// missing. The file is never removed, so every opener locks the same file.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("flock: %w", err)
	}
	lf := &File{path: path, f: f}
	if err := lf.init(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return lf, nil
}

// Path returns the path the file was opened with.
func (l *File) Path() string { return l.path }

// TryLock takes the lock without waiting, or returns ErrHeld.
func (l *File) TryLock() error {
	if l.held {
		return errors.New("flock: TryLock of a lock this File already holds")
	}
	ok, err := l.try()
	if err != nil {
		return fmt.Errorf("flock: lock %s: %w", l.path, err)
	}
	if !ok {
		return ErrHeld
	}
	l.held = true
	return nil
}

// Lock takes the lock, waiting until it is free or ctx ends; then it
// returns ctx's error. See the package documentation for how it waits.
func (l *File) Lock(ctx context.Context) error {
	if l.held {
		return errors.New("flock: Lock of a lock this File already holds")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.mem != nil {
		select {
		case l.mem.ch <- struct{}{}:
			l.held = true
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if ctx.Done() == nil {
		if err := l.block(); err != nil {
			return fmt.Errorf("flock: lock %s: %w", l.path, err)
		}
		l.held = true
		return nil
	}
	err := poll.Until(ctx, 50*time.Microsecond, 5*time.Millisecond, func() (bool, error) {
		ok, err := l.try()
		if err != nil {
			return false, fmt.Errorf("flock: lock %s: %w", l.path, err)
		}
		return ok, nil
	})
	if err != nil {
		return err
	}
	l.held = true
	return nil
}

// Unlock releases the lock. Unlocking a File that does not hold it does
// nothing.
func (l *File) Unlock() error {
	if !l.held {
		return nil
	}
	l.held = false
	if err := l.unlock(); err != nil {
		return fmt.Errorf("flock: unlock %s: %w", l.path, err)
	}
	return nil
}

// Close releases the lock if the File holds it and closes the file.
func (l *File) Close() error {
	err := l.Unlock()
	return errors.Join(err, l.f.Close())
}

// memLock is the lock of one path within this process, for systems whose
// file lock does not keep apart the Files of one process (and for those
// that have none).
type memLock struct {
	ch chan struct{}
}
