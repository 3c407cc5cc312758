package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReaderDevicePulls: a reader on a device of a hub pulls the records a
// writer pushed, Sync after Sync, and its handle still writes nothing. A
// reader's Sync pushes nothing: a device holding unpushed changes (of a
// writer) makes the reader's push fail with ErrNotPermitted after its pull,
// and the writer's own Sync pushes them.
func TestReaderDevicePulls(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	notesA := vault.CollectionOf[Note](a, "notes")
	require.NoError(t, a.Grant(ctx, "carol", vault.Secret([]byte("c")), vault.RoleReader))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	require.NoError(t, notesA.Put(ctx, "n1", Note{Text: "one"}))
	mustSync(t, a)

	carol := openPerson(t, hubPerson(devB, hub, "carol", "c"))
	require.Equal(t, vault.RoleReader, carol.Role())
	notesB := vault.CollectionOf[Note](carol, "notes")
	mustSync(t, carol)
	got, err := notesB.Get(ctx, "n1")
	require.NoError(t, err)
	assert.Equal(t, "one", got.Text)

	require.NoError(t, notesA.Put(ctx, "n2", Note{Text: "two"}))
	require.NoError(t, notesA.Delete(ctx, "n1"))
	mustSync(t, a)
	mustSync(t, carol)
	_, err = notesB.Get(ctx, "n1")
	assert.ErrorIs(t, err, vault.ErrNotFound)
	got, err = notesB.Get(ctx, "n2")
	require.NoError(t, err)
	assert.Equal(t, "two", got.Text)
	assert.ErrorIs(t, notesB.Put(ctx, "n3", Note{Text: "no"}), vault.ErrNotPermitted)
	verified(t, carol)

	// Bob writes on device B without syncing; carol's Sync pulls, then
	// refuses to push his change; bob's Sync pushes it.
	bob := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "from-bob", Note{Text: "b"}))
	require.NoError(t, notesA.Put(ctx, "n4", Note{Text: "four"}))
	mustSync(t, a)
	_, err = carol.Sync(ctx)
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	got, err = notesB.Get(ctx, "n4")
	require.NoError(t, err, "the pull ran before the push was refused")
	assert.Equal(t, "four", got.Text)
	mustSync(t, bob)
	mustSync(t, carol)
	mustSync(t, a)
	got, err = notesA.Get(ctx, "from-bob")
	require.NoError(t, err)
	assert.Equal(t, "b", got.Text)
	verified(t, carol)
	verified(t, a)
}

// TestReaderSecretChangeTravels: a reader's secret change on its device
// reaches the hub and the other devices with the reader's Sync.
func TestReaderSecretChangeTravels(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "carol", vault.Secret([]byte("c1")), vault.RoleReader))
	mustSync(t, a)
	carol := openPerson(t, hubPerson(devB, hub, "carol", "c1"))
	require.NoError(t, carol.ChangeSecret(ctx, []byte("c1"), []byte("c2")))
	mustSync(t, carol)
	mustSync(t, a)
	_, err := vault.Open(ctx, hubPerson(devA, hub, "carol", "c1"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	openPerson(t, hubPerson(devA, hub, "carol", "c2"))
}
