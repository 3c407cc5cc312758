package faultstore_test

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// bulkStore is a memstore with the bulk paths, counting their calls and
// its single reads.
type bulkStore struct {
	stores.Store
	gets, lists, getMany, listAfter atomic.Int64
}

func (b *bulkStore) Get(ctx context.Context, key string) (stores.Item, error) {
	b.gets.Add(1)
	return b.Store.Get(ctx, key)
}

func (b *bulkStore) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	b.lists.Add(1)
	return b.Store.List(ctx, prefix)
}

func (b *bulkStore) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	b.getMany.Add(1)
	return stores.GetMany(ctx, b.Store, keys)
}

func (b *bulkStore) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	b.listAfter.Add(1)
	return stores.ListAfter(ctx, b.Store, prefix, after)
}

// TestBulkPathsPassThrough: the wrapper keeps the inner store's GetMany and
// ListAfter (one call each, no single Get or whole List), and a fault
// before a read strikes them as it strikes Get and List.
func TestBulkPathsPassThrough(t *testing.T) {
	ctx := context.Background()
	inner := &bulkStore{Store: memstore.New()}
	for i := range 5 {
		_, err := inner.Store.Put(ctx, fmt.Sprintf("k/%d", i), []byte{byte(i)})
		require.NoError(t, err)
	}
	var ops []faultstore.Op
	fail := atomic.Bool{}
	st := faultstore.New(inner, faultstore.Options{Before: func(op faultstore.Op, _ string) error {
		ops = append(ops, op)
		if fail.Load() {
			return faultstore.ErrInjected
		}
		return nil
	}})
	require.Implements(t, (*stores.MultiGetter)(nil), st)
	require.Implements(t, (*stores.RangeLister)(nil), st)

	items, err := stores.GetMany(ctx, st, []string{"k/3", "k/1", "k/9"})
	require.NoError(t, err)
	assert.Equal(t, []string{"k/1", "k/3"}, itemKeys(items))
	var listed []stores.Item
	for it, err := range stores.ListAfter(ctx, st, "k/", "k/2") {
		require.NoError(t, err)
		listed = append(listed, it)
	}
	assert.Equal(t, []string{"k/3", "k/4"}, itemKeys(listed))
	assert.Equal(t, []int64{1, 1, 0, 0}, []int64{inner.getMany.Load(), inner.listAfter.Load(), inner.gets.Load(), inner.lists.Load()})
	assert.Equal(t, []faultstore.Op{faultstore.OpGet, faultstore.OpList}, ops)

	fail.Store(true)
	_, err = stores.GetMany(ctx, st, []string{"k/1"})
	require.ErrorIs(t, err, faultstore.ErrInjected)
	for _, err := range stores.ListAfter(ctx, st, "k/", "") {
		require.ErrorIs(t, err, faultstore.ErrInjected)
	}
	assert.Equal(t, int64(1), inner.getMany.Load(), "a fault before the read reads nothing")
}

func itemKeys(items []stores.Item) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}
