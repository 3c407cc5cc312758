package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReview15ReaderPullsAfterRotation: a reader on a device of a hub
// keeps pulling after an owner rotated the keys elsewhere: a record
// written with generation 2 reaches it, and so does its next revision
// (which the reader's Sync compares with the generation 2 copy its device
// already holds).
func TestReview15ReaderPullsAfterRotation(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	notesA := vault.CollectionOf[Note](a, "notes")
	require.NoError(t, a.Grant(ctx, "carol", vault.Secret([]byte("c")), vault.RoleReader))
	require.NoError(t, notesA.Put(ctx, "n1", Note{Text: "one"}))
	mustSync(t, a)
	carol := openPerson(t, hubPerson(devB, hub, "carol", "c"))
	mustSync(t, carol)

	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, notesA.Put(ctx, "n2", Note{Text: "two"}))
	mustSync(t, a)
	rep := mustSync(t, carol)
	assert.Empty(t, rep.Rejected)
	notesB := vault.CollectionOf[Note](carol, "notes")
	for id, want := range map[string]string{"n1": "one", "n2": "two"} {
		got, err := notesB.Get(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, want, got.Text, id)
	}

	require.NoError(t, notesA.Put(ctx, "n2", Note{Text: "two, again"}))
	mustSync(t, a)
	rep = mustSync(t, carol)
	assert.Empty(t, rep.Rejected)
	got, err := notesB.Get(ctx, "n2")
	require.NoError(t, err)
	assert.Equal(t, "two, again", got.Text)
	verified(t, carol)
}
