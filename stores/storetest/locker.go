package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
)

// lockGuard bounds the waits of the Locker subtests that must end, so that
// a lock that is never released fails the test instead of hanging it; it
// is never used to assert how long anything takes.
const lockGuard = time.Minute

// openLocker returns a fresh store as a Locker, or skips t when the store
// does not implement one.
func (s suite) openLocker(t *testing.T) (stores.Store, stores.Locker) {
	t.Helper()
	st := s.open(t)
	lk, ok := st.(stores.Locker)
	if !ok {
		t.Skip("store does not implement stores.Locker")
	}
	return st, lk
}

// guarded is a context that ends after lockGuard or with t.
func guarded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), lockGuard)
	t.Cleanup(cancel)
	return ctx
}

// testLockExclusion: 16 goroutines take one lock 25 times each and
// increment a plain counter under it: never two holders at once, and the
// counter ends at exactly 400 (the race detector checks the counter too).
func (s suite) testLockExclusion(t *testing.T) {
	_, lk := s.openLocker(t)
	ctx := guarded(t)
	const workers, per = 16, 25
	var (
		counter, holders int
		inside           atomic.Int32
		overlaps         atomic.Int32
		wg               sync.WaitGroup
		errs             = make(chan error, workers)
	)
	for range workers {
		wg.Go(func() {
			for range per {
				unlock, err := lk.Lock(ctx, "counter")
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				counter++
				holders = max(holders, int(inside.Load()))
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, workers*per, counter)
	assert.Zero(t, overlaps.Load(), "two holders of one lock at once")
	assert.Equal(t, 1, holders)
}

// testLockUnlock: a held lock makes TryLock fail with ErrLockHeld; unlock
// frees it, a second call of unlock does nothing, and other names are
// other locks.
func (s suite) testLockUnlock(t *testing.T) {
	_, lk := s.openLocker(t)
	ctx := guarded(t)
	unlock, err := lk.Lock(ctx, "a")
	require.NoError(t, err)
	_, err = lk.TryLock(ctx, "a")
	assert.ErrorIs(t, err, stores.ErrLockHeld, "TryLock of a held lock")
	unlockB, err := lk.TryLock(ctx, "b")
	require.NoError(t, err, "TryLock of another name")
	unlock()
	unlock() // does nothing
	again, err := lk.TryLock(ctx, "a")
	require.NoError(t, err, "TryLock after unlock")
	_, err = lk.TryLock(ctx, "a")
	assert.ErrorIs(t, err, stores.ErrLockHeld, "the second unlock released the next holder's lock")
	again()
	unlockB()
	odd := "odd/\x00name é " + string(make([]byte, 300))
	u, err := lk.Lock(ctx, odd)
	require.NoError(t, err, "a name with any bytes")
	u()
}

// testLockWaits: Lock waits for the holder to unlock.
func (s suite) testLockWaits(t *testing.T) {
	_, lk := s.openLocker(t)
	ctx := guarded(t)
	unlock, err := lk.Lock(ctx, "w")
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		u, err := lk.Lock(ctx, "w")
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Lock of a held lock returned %v", err)
	default:
	}
	unlock()
	require.NoError(t, <-got)
}

// testLockCancel: a Lock waiting for a held lock returns ctx's error when
// ctx ends, and leaves nothing held; a Lock or TryLock with an ended ctx
// fails with its error.
func (s suite) testLockCancel(t *testing.T) {
	_, lk := s.openLocker(t)
	ctx := guarded(t)
	unlock, err := lk.Lock(ctx, "c")
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		u, err := lk.Lock(wctx, "c")
		if err == nil {
			u()
		}
		got <- err
	}()
	cancel()
	require.ErrorIs(t, <-got, context.Canceled)
	unlock()
	u, err := lk.TryLock(ctx, "c")
	require.NoError(t, err, "the cancelled waiter holds the lock")
	u()
	_, err = lk.Lock(wctx, "c")
	assert.ErrorIs(t, err, context.Canceled, "Lock with an ended ctx")
	_, err = lk.TryLock(wctx, "c")
	assert.ErrorIs(t, err, context.Canceled, "TryLock with an ended ctx")
}

// testLockClosed: Lock and TryLock of a closed store fail with ErrClosed.
func (s suite) testLockClosed(t *testing.T) {
	st, lk := s.openLocker(t)
	require.NoError(t, st.Close())
	_, err := lk.Lock(context.Background(), "x")
	assert.ErrorIs(t, err, stores.ErrClosed, "Lock")
	_, err = lk.TryLock(context.Background(), "x")
	assert.ErrorIs(t, err, stores.ErrClosed, "TryLock")
}

// Holder takes the lock called name of the store under test from outside
// this process's handles on it: in another process (or, where that is the
// only other holder there can be, on a connection of its own), and returns
// once it holds the lock. The returned kill ends that holder abruptly (kill
// -9 of the process, or the end of its connection), without unlocking, and
// returns once it is gone.
type Holder func(t *testing.T, name string) (kill func())

// RunLockerDeath checks that a lock of lk whose holder dies is released:
// while hold's holder has it, TryLock fails with stores.ErrLockHeld and a
// Lock whose ctx ends gets ctx's error; once the holder is killed, Lock gets
// the lock (waiting, as the store may take a moment to see the death).
func RunLockerDeath(t *testing.T, lk stores.Locker, hold Holder) {
	ctx := guarded(t)
	const name = "dead holder"
	kill := hold(t, name)
	_, err := lk.TryLock(ctx, name)
	require.ErrorIs(t, err, stores.ErrLockHeld, "TryLock while another process holds the lock")
	wctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		u, err := lk.Lock(wctx, name)
		if err == nil {
			u()
		}
		got <- err
	}()
	cancel()
	require.ErrorIs(t, <-got, context.Canceled)
	kill()
	unlock, err := lk.Lock(ctx, name)
	require.NoError(t, err, "the lock of a dead holder was not released")
	unlock()
}
