//go:build !unix && !windows

package flock

import (
	"path/filepath"
	"sync"
)

// CrossProcess is false: this system has no file lock, and the lock keeps
// apart only the Files of this process that lock the same path.
const CrossProcess = false

// memLocks holds one memLock per absolute path.
var memLocks sync.Map // string -> *memLock

func (l *File) init() error {
	p, err := filepath.Abs(l.path)
	if err != nil {
		p = l.path
	}
	m, _ := memLocks.LoadOrStore(p, &memLock{ch: make(chan struct{}, 1)})
	l.mem = m.(*memLock)
	return nil
}

func (l *File) try() (bool, error) {
	select {
	case l.mem.ch <- struct{}{}:
		return true, nil
	default:
		return false, nil
	}
}

func (l *File) block() error { return nil } // unused: Lock waits on l.mem

func (l *File) unlock() error {
	<-l.mem.ch
	return nil
}
