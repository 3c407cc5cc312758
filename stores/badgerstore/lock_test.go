package badgerstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

func TestLock(t *testing.T) {
	s := open(t, "", &badgerstore.Options{InMemory: true})
	ctx := context.Background()

	// Holders of one name never overlap; other names are independent.
	var mu sync.Mutex
	inside, most := 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				unlock, err := s.Lock(ctx, "a")
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				other, err := s.Lock(ctx, "b") // another name: not held by a
				assert.NoError(t, err)
				other()
				mu.Lock()
				inside--
				mu.Unlock()
				unlock()
				unlock() // a second call does nothing
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, most, "one holder at a time")

	// A waiter whose context ends gives up without the lock.
	unlock, err := s.Lock(ctx, "a")
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Lock(cctx, "a")
		errc <- err
	}()
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	unlock()
	again, err := s.Lock(ctx, "a")
	require.NoError(t, err, "the lock is free once released")
	again()

	require.NoError(t, s.Close())
	_, err = s.Lock(ctx, "a")
	assert.ErrorIs(t, err, stores.ErrClosed)
}
