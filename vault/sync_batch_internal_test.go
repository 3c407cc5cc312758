package vault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestSyncInBatchesAndPasses: with batches of 3 records and ledger passes
// of 7 entries, syncs of dozens of changes on two devices (conflicts
// included) go through many local and hub commits and converge.
func TestSyncInBatchesAndPasses(t *testing.T) {
	defer func(b, p int) { syncBatch, syncPass = b, p }(syncBatch, syncPass)
	syncBatch, syncPass = 3, 7
	ctx := context.Background()
	hub, da, db := memstore.New(), memstore.New(), memstore.New()
	open := func(st stores.Store) *Vault {
		v, err := Open(ctx, Config{Store: st, Hub: hub, Name: "shop", User: "alice", Secret: []byte("s3cret"),
			KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = v.Close() })
		return v
	}
	a, b := open(da), open(db)
	ca, cb := CollectionOf[string](a, "notes"), CollectionOf[string](b, "notes")
	for i := range 40 {
		require.NoError(t, ca.Put(ctx, fmt.Sprintf("n%02d", i), "first"))
	}
	rep, err := a.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, 40, rep.Pushed)
	// A's pull cursor is past its own pushes: the next pull fetches nothing.
	cur, err := (&syncRun{v: a, h: a.hub}).loadPull(ctx)
	require.NoError(t, err)
	head, err := a.hub.ledger.Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head.Seq, cur.seq)
	assert.Equal(t, uint64(40), cur.seq)
	rep, err = b.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, 40, rep.Pulled)

	for i := 0; i < 40; i += 2 {
		require.NoError(t, ca.Put(ctx, fmt.Sprintf("n%02d", i), "a"))
	}
	for i := 30; i < 35; i++ {
		require.NoError(t, ca.Delete(ctx, fmt.Sprintf("n%02d", i)))
	}
	for i := 1; i < 20; i += 2 {
		require.NoError(t, cb.Put(ctx, fmt.Sprintf("n%02d", i), "b"))
	}
	for _, i := range []int{0, 2, 4} { // also edited by A: conflicts
		require.NoError(t, cb.Put(ctx, fmt.Sprintf("n%02d", i), "b"))
		require.NoError(t, cb.Put(ctx, fmt.Sprintf("n%02d", i), "b2"))
	}
	ra, err := a.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, 22, ra.Pushed) // 20 edits and 5 deletions of 22 records
	rb, err := b.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, 19, rb.Pulled) // A's 22 records, less the 3 conflicts B won
	assert.Equal(t, 13, rb.Pushed) // B's 10 edits and its 3 winners
	assert.Len(t, rb.Conflicts, 3)
	ra, err = a.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, 13, ra.Pulled)

	records := func(st stores.Store) map[string]string {
		out := map[string]string{}
		for it, err := range st.List(ctx, "v/shop/notes/") {
			require.NoError(t, err)
			out[strings.TrimPrefix(it.Key, "v/shop/notes/")] = string(it.Value)
		}
		return out
	}
	want := records(hub)
	assert.Len(t, want, 35)
	assert.Equal(t, want, records(da))
	assert.Equal(t, want, records(db))
	for _, v := range []*Vault{a, b} {
		r, err := v.Audit().Verify(ctx)
		require.NoError(t, err)
		assert.True(t, r.OK())
	}
	got, err := cb.Get(ctx, "n02")
	require.NoError(t, err)
	assert.Equal(t, "b2", got)
}

// TestSyncInBatchesResumes: a multi-batch sync of device B (a pull of 30
// records and a push of 12) cut at its k-th store operation on either
// side, for every k, converges on the next sync.
func TestSyncInBatchesResumes(t *testing.T) {
	defer func(b, p int) { syncBatch, syncPass = b, p }(syncBatch, syncPass)
	syncBatch, syncPass = 4, 9
	ctx := context.Background()
	errCut := errors.New("connection lost")
	for _, side := range []string{"device", "hub"} {
		t.Run(side, func(t *testing.T) {
			cuts := 0
			for k := int64(1); ; k++ {
				var armed atomic.Bool
				var ops atomic.Int64
				opts := faultstore.Options{Before: func(faultstore.Op, string) error {
					if armed.Load() && ops.Add(1) >= k {
						return errCut
					}
					return nil
				}}
				rawHub, da, rawB := memstore.New(), memstore.New(), memstore.New()
				var hub, db stores.Store = rawHub, rawB
				if side == "hub" {
					hub = faultstore.New(rawHub, opts)
				} else {
					db = faultstore.New(rawB, opts)
				}
				open := func(st stores.Store) *Vault {
					v, err := Open(ctx, Config{Store: st, Hub: hub, Name: "shop", User: "alice", Secret: []byte("s3cret"),
						KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true})
					require.NoError(t, err)
					t.Cleanup(func() { _ = v.Close() })
					return v
				}
				a, b := open(da), open(db)
				ca, cb := CollectionOf[string](a, "notes"), CollectionOf[string](b, "notes")
				for i := range 30 {
					require.NoError(t, ca.Put(ctx, fmt.Sprintf("a%02d", i), "a"))
				}
				for i := range 12 {
					require.NoError(t, cb.Put(ctx, fmt.Sprintf("b%02d", i), "b"))
				}
				_, err := a.Sync(ctx)
				require.NoError(t, err)
				armed.Store(true)
				_, err = b.Sync(ctx)
				armed.Store(false)
				if ops.Load() < k {
					require.NoError(t, err)
					break
				}
				cuts++
				require.ErrorIs(t, err, errCut)
				_, err = b.Sync(ctx)
				require.NoError(t, err)
				_, err = a.Sync(ctx)
				require.NoError(t, err)
				for _, st := range []stores.Store{da, rawB} {
					n := 0
					for it, err := range rawHub.List(ctx, "v/shop/notes/") {
						require.NoError(t, err)
						got, err := st.Get(ctx, it.Key)
						require.NoError(t, err)
						assert.Equal(t, it.Value, got.Value, "cut at %d: %s", k, it.Key)
						n++
					}
					assert.Equal(t, 42, n)
				}
				if t.Failed() {
					return
				}
			}
			assert.Greater(t, cuts, 20)
		})
	}
}
