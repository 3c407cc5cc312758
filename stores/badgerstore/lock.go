package badgerstore

import (
	"context"
	"sync"

	"github.com/noydb-go/noydb/stores"
)

var _ stores.Locker = (*Store)(nil)

// locks are the named locks of a Store: one channel of capacity one each,
// full while the lock is held.
type locks struct {
	mu     sync.Mutex
	byName map[string]chan struct{}
}

// Lock waits for the lock called name and returns the function that
// releases it (calling it again does nothing). badger lets one process
// open a folder, so a lock of the Store is held against every user of the
// data: two vault handles of one process on the same folder (two DBs over
// one Store) take turns on their ledger instead of failing each other's
// transactions. It returns ctx's error if ctx ends first, and
// stores.ErrClosed on a closed Store.
func (s *Store) Lock(ctx context.Context, name string) (func(), error) {
	return s.takeLock(ctx, name, true)
}

// TryLock is Lock without waiting: it returns stores.ErrLockHeld when
// another user of the Store holds the lock.
func (s *Store) TryLock(ctx context.Context, name string) (func(), error) {
	return s.takeLock(ctx, name, false)
}

func (s *Store) takeLock(ctx context.Context, name string, wait bool) (func(), error) {
	done, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	done() // the wait below must not hold off Close
	s.locks.mu.Lock()
	if s.locks.byName == nil {
		s.locks.byName = make(map[string]chan struct{})
	}
	ch, ok := s.locks.byName[name]
	if !ok {
		ch = make(chan struct{}, 1)
		s.locks.byName[name] = ch
	}
	s.locks.mu.Unlock()
	var once sync.Once
	unlock := func() { once.Do(func() { <-ch }) }
	if !wait {
		select {
		case ch <- struct{}{}:
			return unlock, nil
		default:
			return nil, stores.ErrLockHeld
		}
	}
	select {
	case ch <- struct{}{}:
		return unlock, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
