package noydb_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// conflictStore is a store on which, once armed, every commit the filter
// picks fails with stores.ErrConflict: a permanent conflict. It counts the
// commits attempted while armed.
type conflictStore struct {
	stores.Store
	armed    atomic.Bool
	attempts atomic.Int64
}

func newConflictStore(cas bool, pick func(op faultstore.Op, key string) bool) *conflictStore {
	c := &conflictStore{}
	c.Store = faultstore.New(memstore.New(), faultstore.Options{
		HideTransactor: cas,
		Before: func(op faultstore.Op, key string) error {
			if !c.armed.Load() || !pick(op, key) {
				return nil
			}
			c.attempts.Add(1)
			return stores.ErrConflict
		},
	})
	return c
}

// commits picks every commit: transactions and compare-and-swaps.
func commits(op faultstore.Op, _ string) bool {
	return op == faultstore.OpUpdate || op == faultstore.OpCompareAndSwap
}

// TestRetryBudgetsDoNotMultiply: under a permanent conflict, one operation
// attempts at most one retry budget of commits (cas.DefaultMaxAttempts),
// however many retry loops it passes through (vault, ledger batch,
// sequence, numbering pass), and fails with the one ErrContention.
func TestRetryBudgetsDoNotMultiply(t *testing.T) {
	const budget = cas.DefaultMaxAttempts
	ctx := context.Background()
	open := func(t *testing.T, st stores.Store) *vault.Vault {
		return openVault(t, openDB(t, st, "ann", "secret"), "v")
	}
	for _, mode := range []struct {
		name string
		cas  bool
	}{{"transactions", false}, {"compare-and-swap only", true}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Run("collection put", func(t *testing.T) {
				st := newConflictStore(mode.cas, commits)
				v := open(t, st)
				invoices := vault.CollectionOf[Invoice](v, "invoices")
				require.NoError(t, invoices.Put(ctx, "a", Invoice{Total: 1}))
				st.armed.Store(true)
				err := invoices.Put(ctx, "a", Invoice{Total: 2})
				require.ErrorIs(t, err, ledger.ErrContention)
				assert.Equal(t, int64(budget), st.attempts.Load())
			})
			t.Run("sequence next", func(t *testing.T) {
				st := newConflictStore(mode.cas, commits)
				v := open(t, st)
				seq, err := v.Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				_, err = seq.Next(ctx)
				require.NoError(t, err)
				st.armed.Store(true)
				_, err = seq.Next(ctx)
				require.ErrorIs(t, err, sequence.ErrContention)
				assert.Equal(t, int64(budget), st.attempts.Load())
			})
		})
	}
	t.Run("collection put, ledger appends conflict", func(t *testing.T) {
		// The record's compare-and-swap succeeds; its ledger append, retried
		// inside the vault's loop, spends one budget and ends that loop.
		st := newConflictStore(true, func(op faultstore.Op, key string) bool {
			return op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "_ledger/head")
		})
		v := open(t, st)
		invoices := vault.CollectionOf[Invoice](v, "invoices")
		st.armed.Store(true)
		err := invoices.Put(ctx, "a", Invoice{Total: 1})
		require.ErrorIs(t, err, ledger.ErrContention)
		assert.Equal(t, int64(budget), st.attempts.Load())
	})
	t.Run("numbering pass, every commit conflicts", func(t *testing.T) {
		st := newConflictStore(false, commits)
		v := open(t, st)
		receipts, series := receiptSeries(t, v)
		// A first pass stores the series' config, so the armed pass below
		// reaches its head commit.
		require.NoError(t, receipts.Put(ctx, "r-0", Receipt{Total: 10}))
		_, err := series.Enqueue(ctx, "r-0")
		require.NoError(t, err)
		_, err = series.RunPass(ctx)
		require.NoError(t, err)
		require.NoError(t, receipts.Put(ctx, "r-1", Receipt{Total: 10}))
		_, err = series.Enqueue(ctx, "r-1")
		require.NoError(t, err)
		st.armed.Store(true)
		_, err = series.RunPass(ctx)
		require.ErrorIs(t, err, stores.ErrConflict)
		// A pass that loses the commit of its head gives way at once.
		assert.Equal(t, int64(1), st.attempts.Load())
	})
	t.Run("numbering pass, its first config write conflicts", func(t *testing.T) {
		// The config is written once; a store that claims a conflict but
		// holds no config is reported as the conflict, after one attempt,
		// never as another pass running.
		st := newConflictStore(false, commits)
		v := open(t, st)
		receipts, series := receiptSeries(t, v)
		require.NoError(t, receipts.Put(ctx, "r-1", Receipt{Total: 10}))
		_, err := series.Enqueue(ctx, "r-1")
		require.NoError(t, err)
		st.armed.Store(true)
		_, err = series.RunPass(ctx)
		require.ErrorIs(t, err, stores.ErrConflict)
		assert.NotErrorIs(t, err, numbering.ErrPassRunning)
		assert.Equal(t, int64(1), st.attempts.Load())
	})
	t.Run("numbering pass, ledger appends conflict", func(t *testing.T) {
		// Only the ledger's head conflicts: the pass reaches its appends.
		st := newConflictStore(true, func(op faultstore.Op, key string) bool {
			return op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "_ledger/head")
		})
		v := open(t, st)
		receipts, series := receiptSeries(t, v)
		require.NoError(t, receipts.Put(ctx, "r-1", Receipt{Total: 10}))
		_, err := series.Enqueue(ctx, "r-1")
		require.NoError(t, err)
		st.armed.Store(true)
		_, err = series.RunPass(ctx)
		require.ErrorIs(t, err, ledger.ErrContention)
		assert.Equal(t, int64(budget), st.attempts.Load())

		// The pass resumes once the conflicts stop.
		st.armed.Store(false)
		_, err = series.RunPass(ctx)
		require.NoError(t, err)
		a, ok, err := series.Lookup(ctx, "r-1")
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, uint64(1), a.Number)
	})
}
