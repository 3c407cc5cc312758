package faultstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

func TestAdversaryCommands(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	st := adv.Store()
	_, isTx := st.(stores.Transactor)
	require.True(t, isTx, "memstore's transactions must show through")

	for _, k := range []string{"a/1", "a/2", "b/1"} {
		_, err := st.Put(ctx, k, []byte("old "+k))
		require.NoError(t, err)
	}
	snap, err := adv.Snapshot(ctx)
	require.NoError(t, err)
	_, err = st.Put(ctx, "a/1", []byte("new"))
	require.NoError(t, err)
	_, err = st.Put(ctx, "a/3", []byte("new"))
	require.NoError(t, err)

	require.NoError(t, adv.Restore(ctx, snap, "a/"))
	keys, err := adv.Keys(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []string{"a/1", "a/2", "b/1"}, keys)
	it, err := st.Get(ctx, "a/1")
	require.NoError(t, err)
	assert.Equal(t, "old a/1", string(it.Value))

	require.NoError(t, adv.Drop(ctx, "a/2"))
	_, err = st.Get(ctx, "a/2")
	assert.ErrorIs(t, err, stores.ErrNotFound)

	adv.InjectList("a/", stores.Item{Key: "zz", Value: []byte("x")})
	var listed []string
	for it, err := range st.List(ctx, "a/") {
		require.NoError(t, err)
		listed = append(listed, it.Key)
	}
	assert.Equal(t, []string{"zz", "a/1"}, listed)
	var under []string
	var underErr error
	for it, err := range stores.ListUnder(ctx, st, "a/") {
		if err != nil {
			underErr = err
			continue
		}
		under = append(under, it.Key)
	}
	assert.ErrorIs(t, underErr, stores.ErrMisbehaving, "ListUnder ends on the key outside the prefix")
	assert.Empty(t, under, "nothing after it is trusted")
	clean := 0
	for _, err := range stores.ListUnder(ctx, st, "b/") {
		require.NoError(t, err)
		clean++
	}
	assert.Equal(t, 1, clean)
	assert.ErrorIs(t, stores.CheckListed("a/", "zz"), stores.ErrMisbehaving)
	assert.NoError(t, stores.CheckListed("a/", "a/1"))

	adv.AnswerGet("b/1", stores.Item{Key: "a/1", Value: []byte("x"), Version: 9})
	it, err = st.Get(ctx, "b/1")
	require.NoError(t, err)
	assert.Equal(t, "a/1", it.Key, "the answer told, not the store's")

	adv.FailAfterCommit(1)
	_, err = st.Put(ctx, "c", []byte("v"))
	assert.ErrorIs(t, err, faultstore.ErrInjectedAfter)
	it, err = st.Get(ctx, "c")
	require.NoError(t, err, "the write was applied before the error")
	assert.Equal(t, "v", string(it.Value))
	_, err = st.Put(ctx, "d", []byte("v"))
	assert.NoError(t, err, "only one write was to fail")

	ran := 0
	adv.InNextTransaction(func() { ran++ })
	tr := st.(stores.Transactor)
	for range 2 {
		require.NoError(t, tr.Update(ctx, func(stores.Tx) error { return nil }))
	}
	assert.Equal(t, 1, ran, "the hook runs in the next transaction only")

	n, err := adv.Wipe(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	keys, err = adv.Keys(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, keys)
}
