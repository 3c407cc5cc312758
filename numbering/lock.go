package numbering

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
)

// procLocks holds one mutex per lock identity, so passes in one process
// are kept apart before (and, without a lock directory, instead of) the
// file lock.
var procLocks sync.Map // string → *sync.Mutex

// lockPath is the lock file of the series in s.lockDir: one per vault and
// series, named by a hash so that any series name makes a valid file name.
func (s *Series) lockPath() string {
	sum := sha256.Sum256([]byte(s.dir))
	return filepath.Join(s.lockDir, ".noydb-numbering-"+hex.EncodeToString(sum[:16])+".lock")
}

// lockID names the lock of the series: its lock file, or, without a lock
// directory, the store and the series' key prefix.
func (s *Series) lockID() string {
	if s.lockDir != "" {
		if abs, err := filepath.Abs(s.lockPath()); err == nil {
			return "file\x00" + abs
		}
		return "file\x00" + s.lockPath()
	}
	store := fmt.Sprintf("%T", s.b.Store)
	if v := reflect.ValueOf(s.b.Store); v.Kind() == reflect.Pointer {
		store += fmt.Sprintf("@%x", v.Pointer())
	}
	return "store\x00" + store + "\x00" + s.dir
}

// lock takes the series' exclusive pass lock without waiting, or fails
// with ErrPassRunning. The returned function releases it.
func (s *Series) lock() (func(), error) {
	m, _ := procLocks.LoadOrStore(s.lockID(), new(sync.Mutex))
	mu := m.(*sync.Mutex)
	if !mu.TryLock() {
		return nil, ErrPassRunning
	}
	if s.lockDir == "" {
		return mu.Unlock, nil
	}
	if err := os.MkdirAll(s.lockDir, 0o700); err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("lock: %w", err)
	}
	f, err := lockFile(s.lockPath())
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	return func() {
		unlockFile(f)
		mu.Unlock()
	}, nil
}
