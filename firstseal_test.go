package noydb_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// Puts of one new id from many callers at once (so that several share a
// ledger batch, each with a first revision sealed ahead), mixed with
// PutNumbered and Delete of that id: every ledger entry of the id follows
// the one before it (revision 1 after a delete or at the start, else one
// more), the last entry's hash is the stored ciphertext's, the record keeps
// its number, and the ledger verifies.
func TestFirstSealRevisionsInBatches(t *testing.T) {
	for name, mk := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := mk(t)
			db := openDB(t, st, "ann", "s")
			v := openVault(t, db, "books")
			c := vault.CollectionOf[map[string]int](v, "inv")
			seq := mustSeq(t, v, "inv")

			const rounds, callers = 20, 16
			for round := range rounds {
				id := fmt.Sprintf("r%d", round)
				var wg sync.WaitGroup
				for i := range callers {
					wg.Go(func() {
						if i == callers/2 {
							_, err := c.PutNumbered(ctx, id, seq, func(s sequence.Serial) (map[string]int, error) {
								return map[string]int{"n": int(s.N)}, nil
							})
							assert.NoError(t, err)
							return
						}
						assert.NoError(t, c.Put(ctx, id, map[string]int{"i": i}))
					})
				}
				wg.Wait()
				if round%2 == 1 { // deleted, then created again by many at once
					require.NoError(t, c.Delete(ctx, id))
					for i := range callers {
						wg.Go(func() { assert.NoError(t, c.Put(ctx, id, map[string]int{"j": i})) })
					}
					wg.Wait()
				}
			}

			hashes := map[[32]byte]bool{}
			for _, val := range snapshot(t, st) {
				hashes[sha256.Sum256([]byte(val))] = true
			}
			last := map[string]ledger.Entry{}
			numbered := map[string]bool{}
			for e, err := range v.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				if e.Collection != "inv" {
					continue
				}
				prev, seen := last[e.ID]
				switch {
				case e.Kind == ledger.RecordDelete:
					assert.Equal(t, prev.Revision, e.Revision, "seq %d: a delete names the revision it removes", e.Seq)
				case !seen || prev.Kind == ledger.RecordDelete:
					assert.Equal(t, uint64(1), e.Revision, "seq %d: a new record starts at 1", e.Seq)
				default:
					assert.Equal(t, prev.Revision+1, e.Revision, "seq %d: a put follows the revision before", e.Seq)
				}
				if e.Number != 0 {
					numbered[e.ID] = true
				}
				last[e.ID] = e
			}
			require.Len(t, last, rounds)
			for round := range rounds {
				id := fmt.Sprintf("r%d", round)
				e := last[id]
				require.Equal(t, ledger.RecordPut, e.Kind, id)
				assert.True(t, hashes[[32]byte(e.CipherHash)], "%s: the last entry's hash is a stored ciphertext's", id)
				var rec vault.Record[map[string]int]
				for r, err := range c.List(ctx) {
					require.NoError(t, err)
					if r.ID == id {
						rec = r
					}
				}
				assert.Equal(t, e.Revision, rec.Revision, "%s: the stored revision is the last entry's", id)
				assert.True(t, numbered[id], id)
				if round%2 == 0 { // the puts after the number kept it
					_, err := c.PutNumbered(ctx, id, seq, func(sequence.Serial) (map[string]int, error) {
						return nil, fmt.Errorf("%s: numbered again: its mark was lost", id)
					})
					assert.NoError(t, err)
				}
			}
			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.Positive(t, rep.Entries)
		})
	}
}
