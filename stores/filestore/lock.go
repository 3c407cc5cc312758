package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/noydb-go/noydb/stores"
)

// Lock takes the exclusive lock called name, shared by every Store and
// process on this machine that uses the folder (devices syncing the folder
// from elsewhere do not see it). It waits, checking ctx, until the lock is
// free. The lock is a flock(2) on a file in the folder, released by the
// returned function or by the death of the process.
func (s *Store) Lock(ctx context.Context, name string) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	closed := s.closed
	// Not held while waiting: the lock's holder may need the Store (and
	// so get past a Close queued behind this waiter) before it unlocks.
	s.mu.RUnlock()
	if closed {
		return nil, stores.ErrClosed
	}
	sum := sha256.Sum256([]byte(name))
	path := filepath.Join(s.dir, ".noydb-lock-"+hex.EncodeToString(sum[:16]))
	v, _ := s.named.LoadOrStore(path, new(sync.Mutex))
	mu := v.(*sync.Mutex)
	if err := waitFor(ctx, mu.TryLock); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		mu.Unlock()
		return nil, fmt.Errorf("filestore: lock: %w", err)
	}
	if err := waitFor(ctx, func() bool { return tryLockFolder(f) }); err != nil {
		_ = f.Close()
		mu.Unlock()
		return nil, err
	}
	return func() {
		unlockFolder(f)
		_ = f.Close()
		mu.Unlock()
	}, nil
}

// waitFor calls try until it succeeds, backing off from 50µs to 5ms between
// tries, or until ctx ends.
func waitFor(ctx context.Context, try func() bool) error {
	delay := 50 * time.Microsecond
	for !try() {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Millisecond)
	}
	return nil
}
