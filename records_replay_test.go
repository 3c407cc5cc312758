package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/vault"
)

// What a store that replays an older revision of a record gets away with,
// as vault.Record documents: the older revision opens (it is authentic),
// so a read cannot tell it from the current one, and a read-modify-write
// on it overwrites the newer revision. The ledger keeps the evidence: the
// revision written after the replay appears twice for the record, with
// two different ciphertext hashes, without a delete in between.
func TestReplayedRecordRevisionIsUndetectedByReads(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, v := advVault(t, newStore)
			counters := vault.CollectionOf[counterRec](v, "counters")
			const key = "v/books/counters/c"
			require.NoError(t, counters.Put(ctx, "c", counterRec{Count: 1}))
			old, err := adv.Raw().Get(ctx, key)
			require.NoError(t, err)
			_, err = counters.Update(ctx, "c", func(r *counterRec) error { r.Count = 2; return nil })
			require.NoError(t, err)

			require.NoError(t, adv.Set(ctx, key, old.Value)) // the replay
			r, err := counters.GetRecord(ctx, "c")
			require.NoError(t, err, "an older authentic revision opens")
			assert.Equal(t, uint64(1), r.Revision)
			assert.Equal(t, 1, r.Value.Count)

			got, err := counters.Update(ctx, "c", func(r *counterRec) error { r.Count += 10; return nil })
			require.NoError(t, err)
			assert.Equal(t, uint64(2), got.Revision)
			assert.Equal(t, 11, got.Value.Count, "the update of revision 2 is lost")

			puts := ledgerEntries(t, v, ledger.RecordPut, "counters", "c")
			require.Len(t, puts, 3)
			assert.Equal(t, []uint64{1, 2, 2}, []uint64{puts[0].Revision, puts[1].Revision, puts[2].Revision})
			assert.NotEqual(t, puts[1].CipherHash, puts[2].CipherHash, "two different revisions 2: the evidence")
			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK(), "the chain itself is intact")
		})
	}
}

// A revision names a write only while the record lives (vault.PutIf):
// after a delete and a new record at the id, a PutIf on a revision read
// before the delete succeeds on the new record. Records whose ids are
// re-used need a version field of their own.
func TestRevisionRestartsAfterDelete(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, memAndBadger()["memstore"](t), "firm", "s"), "books")
	counters := vault.CollectionOf[counterRec](v, "counters")
	require.NoError(t, counters.Put(ctx, "c", counterRec{Name: "first"}))
	read, err := counters.GetRecord(ctx, "c")
	require.NoError(t, err)
	require.NoError(t, counters.Delete(ctx, "c"))
	require.NoError(t, counters.Put(ctx, "c", counterRec{Name: "second"}))

	again, err := counters.GetRecord(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, read.Revision, again.Revision, "both are revision 1")
	require.NoError(t, counters.PutIf(ctx, "c", counterRec{Name: "first, edited"}, read.Revision))
	got, err := counters.Get(ctx, "c")
	require.NoError(t, err)
	assert.Equal(t, "first, edited", got.Name, "the write landed on the second record")
}
