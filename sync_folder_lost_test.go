package noydb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestSyncFileFolderCutKeepsTheLosingSide: device A, on a file folder
// (whose pull commits are staged), loses a conflict by its policy, its
// sync cut at each store operation on the device (before or after it
// applied). Once it syncs again, every conflict its ledger says a side
// lost has that side readable (LostValue): the staged commit must not
// record the loss and then drop the value it set aside.
func TestSyncFileFolderCutKeepsTheLosingSide(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, c *cutter) bool {
		rawHub, rawA := memstore.New(), newFolder(t)
		a := syncDevice(t, faultstore.New(rawA, faultstore.Options{Before: c.before, After: c.afterWrite}), rawHub)
		b := syncDevice(t, memstore.New(), rawHub)
		defer func() { _ = a.Close(); _ = b.Close() }()
		require.NoError(t, a.SetConflictPolicy("notes", vault.HubWins))
		na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
		require.NoError(t, na.Put(ctx, "x", Note{"base"}))
		mustSync(t, a)
		mustSync(t, b)
		require.NoError(t, na.Put(ctx, "x", Note{"A"}))
		require.NoError(t, nb.Put(ctx, "x", Note{"B"}))
		mustSync(t, b)
		c.armed.Store(true)
		_, err := a.Sync(ctx)
		c.armed.Store(false)
		if !c.reached() {
			require.NoError(t, err)
			return false
		}
		mustSync(t, a)
		mustSync(t, a)
		got, err := na.Get(ctx, "x")
		require.NoError(t, err)
		assert.Equal(t, Note{"B"}, got, "cut at %d", c.k)
		lost, err := a.LostConflicts(ctx)
		require.NoError(t, err)
		for _, lc := range lost {
			r, err := na.LostValue(ctx, lc)
			if assert.NoError(t, err, "cut at %d (after=%v): the conflict at %d", c.k, c.after, lc.Seq) {
				assert.Equal(t, Note{"A"}, r.Value)
			}
		}
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
			assert.Greater(t, cuts, 5, "a sync takes more store operations than that")
			t.Logf("%d cuts", cuts)
		})
	}
}
