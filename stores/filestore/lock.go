package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/noydb-go/noydb/internal/flock"
	"github.com/noydb-go/noydb/stores"
)

// lockPrefix starts the name of the lock file of each name given to Lock.
const lockPrefix = ".noydb-lock-"

// Lock takes the exclusive lock called name, shared by every Store and
// process on this machine that uses the folder (devices syncing the folder
// from elsewhere do not see it). It waits, checking ctx, until the lock is
// free. The lock is a file lock (internal/flock: flock(2), LockFileEx on
// Windows) on the file ".noydb-lock-<hash of name>" in the folder, released
// by the returned function or by the death of the process.
func (s *Store) Lock(ctx context.Context, name string) (unlock func(), err error) {
	return s.takeLock(ctx, name, true)
}

// TryLock is Lock without waiting: it returns stores.ErrLockHeld when
// another Store or process holds the lock.
func (s *Store) TryLock(ctx context.Context, name string) (unlock func(), err error) {
	return s.takeLock(ctx, name, false)
}

func (s *Store) takeLock(ctx context.Context, name string, wait bool) (func(), error) {
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
	path := filepath.Join(s.dir, lockPrefix+hex.EncodeToString(sum[:16]))
	// Waiters of this Store queue on a channel, which ctx can interrupt;
	// only the one at its head polls the file lock.
	v, _ := s.named.LoadOrStore(path, make(chan struct{}, 1))
	ch := v.(chan struct{})
	if wait {
		select {
		case ch <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		select {
		case ch <- struct{}{}:
		default:
			return nil, stores.ErrLockHeld
		}
	}
	f, err := flock.Open(path)
	if err != nil {
		<-ch
		return nil, fmt.Errorf("filestore: lock: %w", err)
	}
	if wait {
		err = f.Lock(ctx)
	} else {
		err = f.TryLock()
	}
	if err != nil {
		_ = f.Close()
		<-ch
		if errors.Is(err, flock.ErrHeld) {
			return nil, stores.ErrLockHeld
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("filestore: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = f.Close()
			<-ch
		})
	}, nil
}
