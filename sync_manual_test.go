package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// conflictSetup: devices A and B synced on note x ("base"), then x changed
// on both by edit functions; A has synced, B has not.
func conflictSetup(t *testing.T, editA, editB func(*vault.Collection[Note]) error, setup func(b *vault.Vault)) (hub stores.Store, da, db stores.Store, a, b *vault.Vault) {
	t.Helper()
	ctx := context.Background()
	hub, da, db = memstore.New(), memstore.New(), memstore.New()
	a, b = syncDevice(t, da, hub), syncDevice(t, db, hub)
	setup(b)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"base"}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, editA(vault.CollectionOf[Note](a, "notes")))
	require.NoError(t, editB(vault.CollectionOf[Note](b, "notes")))
	mustSync(t, a)
	return hub, da, db, a, b
}

func putX(text string) func(*vault.Collection[Note]) error {
	return func(c *vault.Collection[Note]) error { return c.Put(context.Background(), "x", Note{text}) }
}

func deleteX(c *vault.Collection[Note]) error { return c.Delete(context.Background(), "x") }

// TestSyncManualConflict: under Manual the conflict is kept: the device
// keeps and holds back its side, lists the conflict, reads both sides, and
// resolves it; the resolution syncs everywhere.
func TestSyncManualConflict(t *testing.T) {
	ctx := context.Background()
	manual := func(b *vault.Vault) { require.NoError(t, b.SetConflictPolicy("notes", vault.Manual)) }
	hub, da, db, a, b := conflictSetup(t, putX("A"), putX("B"), manual)
	nb := vault.CollectionOf[Note](b, "notes")

	rep := mustSync(t, b)
	assert.Equal(t, []vault.SyncConflict{{Collection: "notes", ID: "x", Policy: vault.Manual,
		DeviceRevision: 2, HubRevision: 2, Kept: true}}, rep.Conflicts)
	assert.Zero(t, rep.Pushed, "a kept conflict is not pushed")
	assert.Equal(t, map[string]string{"x": "B@2"}, notes(t, b))
	mustSync(t, b)
	mustSync(t, a)
	assert.Equal(t, map[string]string{"x": "A@2"}, notes(t, a))

	pending, err := b.Conflicts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.PendingConflict{{Collection: "notes", ID: "x", HubRevision: 2}}, pending)
	dev, hubSide, err := nb.ConflictSides(ctx, "x")
	require.NoError(t, err)
	require.NotNil(t, dev)
	require.NotNil(t, hubSide)
	assert.Equal(t, "B@2", fmt.Sprintf("%s@%d", dev.Value.Text, dev.Revision))
	assert.Equal(t, "A@2", fmt.Sprintf("%s@%d", hubSide.Value.Text, hubSide.Revision))

	require.NoError(t, nb.Resolve(ctx, "x", &Note{"A and B"}))
	assert.ErrorIs(t, nb.Resolve(ctx, "x", &Note{"again"}), vault.ErrNoConflict)
	_, _, err = nb.ConflictSides(ctx, "x")
	assert.ErrorIs(t, err, vault.ErrNoConflict)
	assert.ErrorIs(t, err, vault.ErrNotFound)
	pending, err = b.Conflicts(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)

	assert.Equal(t, 1, mustSync(t, b).Pushed)
	mustSync(t, a)
	assert.Equal(t, map[string]string{"x": "A and B@3"}, assertConverged(t, hub, []stores.Store{da, db}, a, b))
}

// TestSyncManualConflictWithADeletion: the hub deleted the record the
// device edited; the application resolves by deleting it.
func TestSyncManualConflictWithADeletion(t *testing.T) {
	ctx := context.Background()
	manual := func(b *vault.Vault) { require.NoError(t, b.SetConflictPolicy("notes", vault.Manual)) }
	hub, da, db, a, b := conflictSetup(t, deleteX, putX("B"), manual)
	nb := vault.CollectionOf[Note](b, "notes")
	rep := mustSync(t, b)
	require.Len(t, rep.Conflicts, 1)
	assert.True(t, rep.Conflicts[0].Kept && rep.Conflicts[0].HubDeleted)
	dev, hubSide, err := nb.ConflictSides(ctx, "x")
	require.NoError(t, err)
	assert.Nil(t, hubSide)
	require.NotNil(t, dev)
	assert.Equal(t, "B", dev.Value.Text)
	require.NoError(t, nb.Resolve(ctx, "x", nil))
	mustSync(t, b)
	mustSync(t, a)
	assert.Equal(t, map[string]string{}, assertConverged(t, hub, []stores.Store{da, db}, a, b))
}

// TestSyncMerge: a merge function makes the record from both sides; one
// that fails keeps the conflict, with the failure in Rejected.
func TestSyncMerge(t *testing.T) {
	ctx := context.Background()
	concat := func(b *vault.Vault) {
		require.NoError(t, vault.MergeWith(b, "notes", func(local, hub Note) (Note, error) {
			return Note{local.Text + "+" + hub.Text}, nil
		}))
	}
	hub, da, db, a, b := conflictSetup(t, putX("A"), putX("B"), concat)
	rep := mustSync(t, b)
	assert.Equal(t, []vault.SyncConflict{{Collection: "notes", ID: "x", Policy: vault.Merge,
		DeviceRevision: 2, HubRevision: 2, Merged: true}}, rep.Conflicts)
	assert.Equal(t, 1, rep.Pushed)
	mustSync(t, a)
	assert.Equal(t, map[string]string{"x": "B+A@3"}, assertConverged(t, hub, []stores.Store{da, db}, a, b))

	errMerge := errors.New("cannot merge these")
	failing := func(b *vault.Vault) {
		require.NoError(t, vault.MergeWith(b, "notes", func(local, hub Note) (Note, error) { return Note{}, errMerge }))
	}
	_, _, _, _, b = conflictSetup(t, putX("A"), putX("B"), failing)
	rep = mustSync(t, b)
	require.Len(t, rep.Conflicts, 1)
	assert.True(t, rep.Conflicts[0].Kept)
	require.Len(t, rep.Rejected, 1)
	assert.Contains(t, rep.Rejected[0].Reason, "cannot merge these")
	pending, err := b.Conflicts(ctx)
	require.NoError(t, err)
	assert.Len(t, pending, 1)

	// Bad input changes nothing.
	assert.ErrorIs(t, vault.MergeWith[Note](b, "notes", nil), vault.ErrInvalidArgument)
	assert.ErrorIs(t, vault.MergeWith(b, "_x", func(l, h Note) (Note, error) { return l, nil }), vault.ErrReservedName)
}
