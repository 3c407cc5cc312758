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
	select {
	case ch <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-ch }) }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
