package ledger_test

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// listCounter counts the items its store's List and ListAfter yield.
type listCounter struct {
	stores.Store
	listed atomic.Int64
}

func (c *listCounter) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return c.Store.(stores.Transactor).Update(ctx, fn)
}

func (c *listCounter) count(seq iter.Seq2[stores.Item, error]) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for it, err := range seq {
			c.listed.Add(1)
			if !yield(it, err) {
				return
			}
		}
	}
}

func (c *listCounter) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return c.count(c.Store.List(ctx, prefix))
}

func (c *listCounter) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return c.count(c.Store.(stores.RangeLister).ListAfter(ctx, prefix, after))
}

// Reading from a position on a store that lists from a key (a
// stores.RangeLister, as badger and PostgreSQL are) lists the entries from
// there only, even when the narrowest prefix covering the range is the whole
// ledger (from 999 to 1005): what a device pays to read a hub's feed from its
// cursor does not grow with the feed.
func TestReadFromListsFromThere(t *testing.T) {
	inner, err := badgerstore.Open("", &badgerstore.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inner.Close() })
	st := &listCounter{Store: inner}
	l := newLedger(t, st)
	appendBatches(t, l, 1005)

	st.listed.Store(0)
	got := readAll(t, l, 999)
	require.Len(t, got, 7)
	for i, e := range got {
		assert.Equal(t, uint64(999+i), e.Seq)
	}
	assert.Equal(t, int64(7), st.listed.Load(), "items listed to read 7 entries of 1005")
}
