package numbering

import (
	"context"
	"errors"
	"reflect"
	"sync"

	"github.com/noydb-go/noydb/stores"
)

// procLocks holds the pass locks of series on stores that are not a
// stores.Locker, while a pass holds them: a lock released leaves no entry,
// so the process keeps no store it once numbered on.
var procLocks struct {
	mu   sync.Mutex
	held map[procKey]bool
}

// procKey names the pass lock of a series on a store without a Locker.
type procKey struct {
	store stores.Store
	dir   string
}

// lock takes the series' exclusive pass lock without waiting, or fails
// with ErrPassRunning. The returned function releases it.
//
// On a store that implements stores.Locker the lock is the store's lock
// named by the series' key prefix, so it covers whoever the store's locks
// cover (filestore: the processes of this machine; pgstore: every process
// using the database). On another store it is a lock of this process,
// shared by the handles of the series on that store value and held in a
// map only while a pass holds it: passes in other processes are not kept
// out.
//
// A pass does not depend on the lock for correctness where the store has
// atomic compare-and-swap: a pass that lost it (pgstore's session broke)
// fails with ErrPassRunning at its next write of the head (see commit and
// clear), having at worst recorded numbers of a resumed batch twice.
func (s *Series) lock(ctx context.Context) (func(), error) {
	if lk, ok := s.b.Store.(stores.Locker); ok {
		unlock, err := lk.TryLock(ctx, s.dir)
		if errors.Is(err, stores.ErrLockHeld) {
			return nil, ErrPassRunning
		}
		if err != nil {
			return nil, err
		}
		return unlock, nil
	}
	key := procKey{s.b.Store, s.dir}
	if !reflect.TypeOf(s.b.Store).Comparable() {
		// A store value that cannot be a map key: the series of every
		// such store share one lock, which only over-serializes.
		key.store = nil
	}
	procLocks.mu.Lock()
	defer procLocks.mu.Unlock()
	if procLocks.held[key] {
		return nil, ErrPassRunning
	}
	if procLocks.held == nil {
		procLocks.held = map[procKey]bool{}
	}
	procLocks.held[key] = true
	return func() {
		procLocks.mu.Lock()
		defer procLocks.mu.Unlock()
		delete(procLocks.held, key)
	}, nil
}
