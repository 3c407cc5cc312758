package vault

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// bulkHub is a memstore with the bulk paths, counting their calls and its
// single reads; down makes every call fail as an unreachable server.
type bulkHub struct {
	stores.Store
	gets, lists, getMany, listAfter atomic.Int64
	down                            atomic.Bool
}

var errDown = fmt.Errorf("connection refused: %w", stores.ErrUnavailable)

func (b *bulkHub) Get(ctx context.Context, key string) (stores.Item, error) {
	b.gets.Add(1)
	return b.Store.Get(ctx, key)
}

func (b *bulkHub) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	b.lists.Add(1)
	return b.Store.List(ctx, prefix)
}

func (b *bulkHub) GetMany(ctx context.Context, keys []string) ([]stores.Item, error) {
	b.getMany.Add(1)
	if b.down.Load() {
		return nil, errDown
	}
	return stores.GetMany(ctx, b.Store, keys)
}

func (b *bulkHub) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	b.listAfter.Add(1)
	if b.down.Load() {
		return func(yield func(stores.Item, error) bool) { yield(stores.Item{}, errDown) }
	}
	return stores.ListAfter(ctx, b.Store, prefix, after)
}

// TestHubStoreKeepsTheBulkPaths: the hub as a device's vault sees it keeps
// the hub store's GetMany and ListAfter (one call each, no single Get or
// whole List), and an unreachable hub answers them with an error wrapping
// sequence.ErrOffline and its cause.
func TestHubStoreKeepsTheBulkPaths(t *testing.T) {
	ctx := context.Background()
	inner := &bulkHub{Store: memstore.New()}
	for i := range 5 {
		_, err := inner.Store.Put(ctx, fmt.Sprintf("k/%d", i), []byte{byte(i)})
		require.NoError(t, err)
	}
	for _, st := range []stores.Store{wrapHub(inner, time.Minute, nil), wrapHub(struct{ *bulkHub }{inner}, 0, nil)} {
		require.Implements(t, (*stores.MultiGetter)(nil), st)
		require.Implements(t, (*stores.RangeLister)(nil), st)
	}
	st := wrapHub(inner, time.Minute, nil)
	items, err := stores.GetMany(ctx, st, []string{"k/4", "k/0", "k/7"})
	require.NoError(t, err)
	assert.Equal(t, []string{"k/0", "k/4"}, []string{items[0].Key, items[1].Key})
	var listed []string
	for it, err := range stores.ListAfter(ctx, st, "k/", "k/2") {
		require.NoError(t, err)
		listed = append(listed, it.Key)
	}
	assert.Equal(t, []string{"k/3", "k/4"}, listed)
	assert.Equal(t, []int64{1, 1, 0, 0}, []int64{inner.getMany.Load(), inner.listAfter.Load(), inner.gets.Load(), inner.lists.Load()})

	inner.down.Store(true)
	_, err = stores.GetMany(ctx, st, []string{"k/1"})
	require.ErrorIs(t, err, sequence.ErrOffline)
	require.ErrorIs(t, err, stores.ErrUnavailable)
	for _, err := range stores.ListAfter(ctx, st, "k/", "") {
		require.ErrorIs(t, err, sequence.ErrOffline)
		require.ErrorIs(t, err, stores.ErrUnavailable)
	}
}

// TestHandoffKeyIsTheSeries: the handoff keys sync computes are those the
// numbering series writes.
func TestHandoffKeyIsTheSeries(t *testing.T) {
	v, err := Open(context.Background(), Config{Store: memstore.New(), Name: "shop", User: "alice", Secret: []byte("s3cret"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true})
	require.NoError(t, err)
	defer func() { _ = v.Close() }()
	_, hooks, err := v.numberingSeries("receipt", numbering.Options{Collection: "receipts"}, nil)
	require.NoError(t, err)
	const p, id = "01890a5d-ac96-774b-bcce-b302099a8057", "r1"
	want, _, err := hooks.Handoff(p, id)
	require.NoError(t, err)
	assert.Equal(t, want, v.handoffKey("receipt", p, id))
	assert.Equal(t, []string{want}, v.handoffKeys(id, []mark{{kind: markPending, series: "receipt", partition: []string{p}}, {kind: markNumbering, series: "other", n: 3}}))
}
