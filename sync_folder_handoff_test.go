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

// TestSyncFileFolderCutPullOfStampedReceipt: a file-folder device A wrote
// a receipt offline (pending, with its handoff entry) and pushed it; a
// pass on the hub numbered it. A's next sync, which pulls the stamped
// receipt, is cut at its k-th store operation on A, before or just after
// it applied, for every k up to the operations of the whole sync (a kill
// -9 between the staged writes of the pull's commit). A sync without
// faults then leaves no handoff entry on A or the hub, and A, B and the
// hub hold the receipt with number 1.
func TestSyncFileFolderCutPullOfStampedReceipt(t *testing.T) {
	ctx := context.Background()
	const pending = "v/shop/_numbering/receipt/pending/"
	run := func(t *testing.T, c *cutter) bool {
		rawHub, rawA, rawB := memstore.New(), newFolder(t), memstore.New()
		a := syncDevice(t, faultstore.New(rawA, faultstore.Options{Before: c.before, After: c.afterWrite}), rawHub)
		b := syncDevice(t, rawB, rawHub)
		defer func() { _ = a.Close(); _ = b.Close() }()
		ra, err := vault.NumberingOf(vault.CollectionOf[Receipt](a, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
		require.NoError(t, err)
		rb, err := vault.NumberingOf(vault.CollectionOf[Receipt](b, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
		require.NoError(t, err)
		r, err := ra.Put(ctx, "r", Receipt{Total: 7})
		require.NoError(t, err)
		require.True(t, r.Pending)
		require.Len(t, keysUnder(t, rawA, pending), 1, "the handoff entry written with the receipt")
		mustSync(t, a)
		mustSync(t, b)
		_, err = rb.Settle(ctx)
		require.NoError(t, err)
		c.armed.Store(true)
		_, err = a.Sync(ctx)
		c.armed.Store(false)
		if !c.reached() {
			require.NoError(t, err)
			return false
		}
		mustSync(t, a)
		mustSync(t, b)
		assertConverged(t, rawHub, []stores.Store{rawA, rawB}, a, b)
		for i, nr := range []*vault.Numbered[Receipt]{ra, rb} {
			got, err := nr.Get(ctx, "r")
			require.NoError(t, err)
			assert.False(t, got.Pending, "device %d", i)
			assert.Equal(t, uint64(1), got.Serial.N, "device %d", i)
			assert.Equal(t, uint64(1), got.Value.Number, "device %d", i)
		}
		assert.Empty(t, keysUnder(t, rawA, pending), "cut at %d (after=%v): A", c.k, c.after)
		assert.Empty(t, keysUnder(t, rawB, pending), "cut at %d (after=%v): B", c.k, c.after)
		assert.Empty(t, keysUnder(t, rawHub, pending), "cut at %d (after=%v): hub", c.k, c.after)
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
