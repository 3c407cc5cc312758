package numbering

import (
	"context"
	"errors"
	"reflect"
	"sync"

	"github.com/noydb-go/noydb/stores"
)

// procLocks holds the pass locks of series on stores that are not a
// stores.Locker: one mutex per store and series.
var procLocks sync.Map // procKey → *sync.Mutex

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
// using the database). On another store it is a mutex of this process,
// shared by the handles of the series on that store value: passes in other
// processes are not kept out.
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
	m, _ := procLocks.LoadOrStore(key, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	if !mu.TryLock() {
		return nil, ErrPassRunning
	}
	return mu.Unlock, nil
}
