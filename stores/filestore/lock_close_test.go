package filestore

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
)

// waitingCtx reports, by closing waiting, the first time a waiter asks for
// its Done channel: Lock does so only once it has to wait.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// A Lock that waits must not hold off Close: the holder of the lock (a
// ledger batch) still needs the store to finish and release it. Before the
// fix the waiter kept the Store's read lock while it waited, Close queued
// for the write lock behind it, and the holder's next call queued behind
// Close: all three waited for ever.
func TestLockWaiterDoesNotHoldOffClose(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	ctx := context.Background()

	unlock, err := s.Lock(ctx, "head")
	require.NoError(t, err)

	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wctx := &waitingCtx{Context: bctx, waiting: make(chan struct{})}
	waiter := make(chan error, 1)
	go func() {
		u, err := s.Lock(wctx, "head")
		if err == nil {
			u()
		}
		waiter <- err
	}()
	<-wctx.waiting // the second Lock waits for the first

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close has either finished or is queued for the write lock.
	closeDone := false
	for !closeDone {
		select {
		case err := <-closed:
			require.NoError(t, err)
			closeDone = true
			continue
		default:
		}
		if !s.mu.TryRLock() {
			break
		}
		s.mu.RUnlock()
		runtime.Gosched()
	}

	// The holder still uses the store before it unlocks.
	got := make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, "k")
		got <- err
	}()
	select {
	case err := <-got:
		assert.True(t, errors.Is(err, stores.ErrNotFound) || errors.Is(err, stores.ErrClosed), "%v", err)
	case <-time.After(10 * time.Second):
		cancel() // free the waiter so that the test ends
		<-got
		t.Fatal("the lock's holder is stuck behind Close, which is stuck behind the lock's waiter")
	}
	unlock()
	err = <-waiter
	assert.True(t, err == nil || errors.Is(err, stores.ErrClosed), "%v", err)
	if !closeDone {
		require.NoError(t, <-closed)
	}
}
