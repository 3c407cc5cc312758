package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// notesOf returns every note of v by id, with its revision.
func notesOf(t testing.TB, v *vault.Vault) map[string]vault.Record[Note] {
	t.Helper()
	out := map[string]vault.Record[Note]{}
	for r, err := range vault.CollectionOf[Note](v, "notes").List(context.Background()) {
		require.NoError(t, err, r.ID)
		out[r.ID] = r
	}
	return out
}

// TestRotateOnSyncedDevices: olga works on devices A and B of a hub. A
// rotates while B, offline, writes with generation 1. What was tested:
// A's re-sealed revisions and new keyring entry reach the hub with Sync;
// B's Sync pulls them and B reads every record (it learns generation 2
// from its keyring entry, which Sync brought, the first time a record
// names it) and from then on writes with generation 2; B's record written
// before is re-sealed with generation 2 by that Sync before it is pushed
// (so ResumeRotation on B finds nothing left). After a last
// round of Sync both devices and the hub hold the same records, each at
// the same revision and sealed by generation 2, and both ledgers verify.
func TestRotateOnSyncedDevices(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	putNotes(t, a, 50)
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	mustSync(t, b)
	require.Len(t, notesOf(t, b), 50)
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b-1", Note{Text: "written with generation 1"}))

	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "a-1", Note{Text: "written with generation 2"}))
	mustSync(t, a)
	assert.Equal(t, map[uint64]int{2: 51}, generations(t, hub))

	mustSync(t, b)
	got := notesOf(t, b)
	require.Len(t, got, 52)
	assert.Equal(t, "written with generation 2", got["a-1"].Value.Text)
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b-2", Note{Text: "after"}))
	assert.Equal(t, map[uint64]int{2: 53}, generations(t, devB), "b-1 re-sealed by the Sync before its push, b-2 on 2")
	assert.Equal(t, map[uint64]int{2: 52}, generations(t, hub), "b-1 pushed re-sealed")

	rot, err = b.ResumeRotation(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	assert.Equal(t, uint64(0), rot.Progress().Done)
	mustSync(t, b)
	mustSync(t, a)

	for name, st := range map[string]stores.Store{"hub": hub, "device A": devA, "device B": devB} {
		assert.Equal(t, map[uint64]int{2: 53}, generations(t, st), name)
	}
	onA, onB := notesOf(t, a), notesOf(t, b)
	require.Len(t, onA, 53)
	for id, r := range onA {
		assert.Equal(t, r.Value, onB[id].Value, id)
		assert.Equal(t, r.Revision, onB[id].Revision, id)
	}
	verified(t, a)
	verified(t, b)
}
