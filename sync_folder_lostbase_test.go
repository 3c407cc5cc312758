package noydb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestSyncFileFolderCutPullThenHubDeletes: device A, on a file folder,
// holds B's notes w and v; it pulls B's edits of w (to revision 3), the
// deletion of v, new notes x (at revision 3), y and z and pending receipt
// r, its sync cut at each store operation on the device (before or after
// it applied); then B deletes w and x and writes them anew (revision 1),
// writes v anew, deletes z, and r while pending, and syncs before A syncs
// again. A cut that left a record written (or deleted) on A without its
// sync base (none, or the one before: a staged commit stops before its
// sync state) must not make the hub's change look like A's own last sync
// (a deletion matching a missing base) or lose to A's pulled copy (a lower
// revision, a deletion): A takes them, and every side ends with B's v, w,
// x and y.
// (Kill-test failures: a receipt deleted on the hub, and notes re-created
// on it, stayed on the file folder as they were, for ever.)
func TestSyncFileFolderCutPullThenHubDeletes(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, c *cutter) bool {
		rawHub, rawA, rawB := memstore.New(), newFolder(t), memstore.New()
		a := syncDevice(t, faultstore.New(rawA, faultstore.Options{Before: c.before, After: c.afterWrite}), rawHub)
		b := syncDevice(t, rawB, rawHub)
		defer func() { _ = a.Close(); _ = b.Close() }()
		nb := vault.CollectionOf[Note](b, "notes")
		rb, err := vault.NumberingOf(vault.CollectionOf[Receipt](b, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
		require.NoError(t, err)
		// w and v are on A already; then B edits w twice and deletes v.
		require.NoError(t, nb.Put(ctx, "w", Note{"w"}))
		require.NoError(t, nb.Put(ctx, "v", Note{"v"}))
		mustSync(t, b)
		mustSync(t, a)
		require.NoError(t, nb.Put(ctx, "w", Note{"w-edit"}))
		require.NoError(t, nb.Put(ctx, "w", Note{"w-edit2"}))
		require.NoError(t, nb.Delete(ctx, "v"))
		for _, x := range []string{"x", "x-edit", "x-edit2"} {
			require.NoError(t, nb.Put(ctx, "x", Note{x}))
		}
		require.NoError(t, nb.Put(ctx, "y", Note{"y"}))
		require.NoError(t, nb.Put(ctx, "z", Note{"z"}))
		r, err := rb.Put(ctx, "r", Receipt{Total: 1})
		require.NoError(t, err)
		require.True(t, r.Pending)
		mustSync(t, b)
		c.armed.Store(true)
		_, err = a.Sync(ctx)
		c.armed.Store(false)
		if !c.reached() {
			require.NoError(t, err)
			return false
		}
		require.NoError(t, nb.Delete(ctx, "x"))
		require.NoError(t, nb.Put(ctx, "x", Note{"x-new"}))
		require.NoError(t, nb.Delete(ctx, "z"))
		require.NoError(t, nb.Delete(ctx, "w"))
		require.NoError(t, nb.Put(ctx, "w", Note{"w-new"}))
		require.NoError(t, nb.Put(ctx, "v", Note{"v-new"}))
		require.NoError(t, rb.Delete(ctx, "r"))
		mustSync(t, b)
		mustSync(t, a)
		mustSync(t, b)
		mustSync(t, a)
		assert.Equal(t, map[string]string{"v": "v-new@1", "w": "w-new@1", "x": "x-new@1", "y": "y@1"}, assertConverged(t, rawHub, []stores.Store{rawA, rawB}, a, b),
			"cut at %d (after=%v)", c.k, c.after)
		return true
	}
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprintf("after=%v", after), func(t *testing.T) {
			cuts := 0
			for k := int64(1); ; k++ {
				if !run(t, &cutter{k: k, after: after}) {
					break
				}
				cuts++
				if t.Failed() {
					return
				}
			}
			assert.Greater(t, cuts, 10, "a sync takes more store operations than that")
			t.Logf("%d cuts", cuts)
		})
	}
}
