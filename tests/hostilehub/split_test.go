package hostilehub_test

import (
	"context"
	"iter"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
)

// splitHub is a hub that shows its devices the history it chooses: every
// call goes to the view it serves at the moment (Serve changes it). Two
// devices, each behind a splitHub serving another view, see two histories
// of one vault: a split-view hub. Each view must have transactions.
type splitHub struct {
	mu   sync.Mutex
	view stores.Store
}

func newSplitHub(view stores.Store) *splitHub { return &splitHub{view: view} }

// Serve makes every later call go to view.
func (h *splitHub) Serve(view stores.Store) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.view = view
}

func (h *splitHub) cur() stores.Store {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.view
}

func (h *splitHub) Get(ctx context.Context, key string) (stores.Item, error) {
	return h.cur().Get(ctx, key)
}

func (h *splitHub) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return h.cur().Put(ctx, key, value)
}

func (h *splitHub) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	return h.cur().CompareAndSwap(ctx, key, expected, value)
}

func (h *splitHub) Delete(ctx context.Context, key string) error { return h.cur().Delete(ctx, key) }

func (h *splitHub) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return h.cur().List(ctx, prefix)
}

func (h *splitHub) Capabilities() stores.Capabilities { return h.cur().Capabilities() }

func (h *splitHub) Close() error { return nil }

func (h *splitHub) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return h.cur().(stores.Transactor).Update(ctx, fn)
}

// fork returns a new hub of the same kind as hub (newHub) holding a copy
// of everything hub holds now: the second view of a split.
func fork(t testing.TB, hub *faultstore.Adversary, newHub func(testing.TB) *faultstore.Adversary) *faultstore.Adversary {
	t.Helper()
	ctx := context.Background()
	snap, err := hub.Snapshot(ctx)
	require.NoError(t, err)
	other := newHub(t)
	require.NoError(t, other.Restore(ctx, snap, ""))
	return other
}
