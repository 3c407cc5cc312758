package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// errCut is the lost connection of a cut sync.
var errCut = errors.New("connection lost")

// cutter fails every store operation from its k-th on while armed (a lost
// connection), or, with after, makes the k-th write report a failure once
// it is applied (a commit whose answer was lost) and lets the rest fail.
type cutter struct {
	armed atomic.Bool
	after bool
	ops   atomic.Int64
	k     int64
}

func (c *cutter) before(faultstore.Op, string) error {
	if !c.armed.Load() {
		return nil
	}
	n := c.ops.Add(1)
	if n > c.k || (!c.after && n == c.k) {
		return errCut
	}
	return nil
}

func (c *cutter) afterWrite(faultstore.Op, string) error {
	if c.armed.Load() && c.after && c.ops.Load() == c.k {
		return errCut
	}
	return nil
}

// reached reports whether the cut struck.
func (c *cutter) reached() bool { return c.ops.Load() >= c.k }

// TestSyncResumesAfterACut: a sync of device A cut at its k-th store
// operation, on the device's store or on the hub's, before or after the
// operation applied, for every k up to the operations of a whole sync; then
// syncs without faults converge on the records every device expects, and
// every ledger verifies.
func TestSyncResumesAfterACut(t *testing.T) {
	ctx := context.Background()
	want := map[string]string{
		"a1": "a1-edit@2", "a3": "a3@1", "b1": "b1-edit@2", "b3": "b3@1",
	}
	for _, side := range []string{"device", "hub"} {
		for _, after := range []bool{false, true} {
			name := fmt.Sprintf("%s/after=%v", side, after)
			t.Run(name, func(t *testing.T) {
				cuts := 0
				for k := int64(1); ; k++ {
					c := &cutter{k: k, after: after}
					opts := faultstore.Options{Before: c.before, After: c.afterWrite}
					rawHub, rawA, rawB := memstore.New(), memstore.New(), memstore.New()
					var hub, da stores.Store = rawHub, rawA
					if side == "hub" {
						hub = faultstore.New(rawHub, opts)
					} else {
						da = faultstore.New(rawA, opts)
					}
					a, b := syncDevice(t, da, hub), syncDevice(t, rawB, hub)
					na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
					for _, id := range []string{"a1", "a2"} {
						require.NoError(t, na.Put(ctx, id, Note{id}))
					}
					for _, id := range []string{"b1", "b2"} {
						require.NoError(t, nb.Put(ctx, id, Note{id}))
					}
					mustSync(t, a)
					mustSync(t, b)
					// Changes on both sides since.
					require.NoError(t, na.Put(ctx, "a1", Note{"a1-edit"}))
					require.NoError(t, na.Delete(ctx, "a2"))
					require.NoError(t, na.Put(ctx, "a3", Note{"a3"}))
					require.NoError(t, nb.Put(ctx, "b1", Note{"b1-edit"}))
					require.NoError(t, nb.Delete(ctx, "b2"))
					require.NoError(t, nb.Put(ctx, "b3", Note{"b3"}))
					mustSync(t, b)

					c.armed.Store(true)
					_, err := a.Sync(ctx)
					c.armed.Store(false)
					if !c.reached() {
						require.NoError(t, err)
						break
					}
					cuts++
					mustSync(t, a)
					mustSync(t, b)
					mustSync(t, a)
					got := assertConverged(t, rawHub, []stores.Store{rawA, rawB}, a, b)
					if !assert.Equal(t, want, got, "cut at %d", k) {
						return
					}
				}
				assert.Greater(t, cuts, 10, "a sync takes more store operations than that")
				t.Logf("%d cuts", cuts)
			})
		}
	}
}
