package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// downStore's transactions read in round trips (stores.Prefetcher) and the
// server is gone: every Prefetch fails, as pgstore's does when it cannot
// reach PostgreSQL. After the hold, it counts the transactions begun.
type downStore struct {
	stores.Store
	tr      stores.Transactor
	down    atomic.Bool
	updates atomic.Int64
}

var errServerGone = errors.New("connection refused")

func (s *downStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if s.down.Load() {
		s.updates.Add(1)
	}
	return s.tr.Update(ctx, func(tx stores.Tx) error { return fn(prefetchTx{tx, s}) })
}

type prefetchTx struct {
	stores.Tx
	s *downStore
}

func (t prefetchTx) Prefetch([]string) error {
	if t.s.down.Load() {
		return errServerGone
	}
	return nil
}

// A batch whose first read fails (the server is unreachable) fails as a
// whole: running its halves, down to single calls, cannot cure it and
// costs 2n-1 attempts to reach the server instead of one.
func TestUnreachableStoreIsNotSplit(t *testing.T) {
	mem := memstore.New()
	st := &downStore{Store: mem, tr: mem}
	l := newLedger(t, st)
	ctx := context.Background()

	const n = 16
	errs := runTogether(t, l, n, func() { st.down.Store(true) }, func(i int) error {
		return l.Update(ctx, writeFact(l, fmt.Sprintf("k%02d", i), i+1, nil))
	})
	for i := range n {
		assert.ErrorIs(t, errs[i], errServerGone, "call %d", i)
	}
	assert.Equal(t, int64(1), st.updates.Load(), "transactions begun for a batch the server cannot take")
}
