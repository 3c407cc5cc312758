package noydb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestCollectionsNarrowedOpenHandle: bob, a writer of notes and payroll,
// keeps a handle open while olga narrows him to notes. What the old
// handle still writes into payroll, Verify refuses at its position with
// OutsideCollections (the narrowing's grant entry comes before it).
func TestCollectionsNarrowedOpenHandle(t *testing.T) {
	t.Skip("known conflict of two merged fixes: since record commits read the store's current generation " +
		"(rotate_current.go), a handle opened before a narrowing can no longer write outside the person's new " +
		"collections (no key: ErrNoAccess), so this test's premise (the write goes through, Verify refuses it) is gone; " +
		"to be rewritten to expect the refusal")
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
	bob := openPerson(t, personCfg(st, "bob", "b"))
	require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-1", Note{Text: "before"}))
	verified(t, owner)

	require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
	verified(t, owner)
	// The handle holds the keys it opened with, and writes.
	require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-2", Note{Text: "after"}))
	head, err := owner.Audit().Head(ctx)
	require.NoError(t, err)
	_, err = owner.Audit().Verify(ctx)
	var se *ledger.SignatureError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, ledger.SignatureError{Seq: head.Seq, Actor: "bob", Problem: ledger.OutsideCollections}, *se)
}

// TestCollectionsNarrowedOpenHandleHub: bob's device handle, opened before
// olga narrowed him to notes, writes p-2 into payroll before its Sync
// brings the narrowing (the device's store still names the old
// generation). His Sync then cannot re-seal p-2 (he holds no payroll key
// of the new generation): it reports p-2 in Rejected, keeps it on the
// device unpushed, and pushes his notes, then and later; the hub's ledger
// verifies and holds nothing of p-2. Given payroll again, his next Sync
// pushes p-2.
func TestCollectionsNarrowedOpenHandleHub(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	bobPayroll, bobNotes := vault.CollectionOf[Note](b, "payroll"), vault.CollectionOf[Note](b, "notes")
	require.NoError(t, bobPayroll.Put(ctx, "p-1", Note{Text: "before"}))
	assert.Equal(t, vault.SyncReport{Pushed: 1}, mustSync(t, b))
	verified(t, openPerson(t, personCfg(hub, "olga", "o")))

	require.NoError(t, a.SetCollections(ctx, "bob", "notes"))
	mustSync(t, a)
	verified(t, openPerson(t, personCfg(hub, "olga", "o")))
	// bob's device has not heard of it: its store names the old generation.
	require.NoError(t, bobPayroll.Put(ctx, "p-2", Note{Text: "after"}))
	require.NoError(t, bobNotes.Put(ctx, "n-1", Note{Text: "one"}))

	rejected := []vault.SyncRejected{{Collection: "payroll", ID: "p-2", Reason: `collection "payroll" is no longer ` +
		`among the person's (no key of it at generation 3): the change is kept on this device, unpushed, until ` +
		`they are given the collection again`}}
	rep := mustSync(t, b)
	assert.Equal(t, 1, rep.Pushed, "n-1")
	assert.Equal(t, rejected, rep.Rejected)
	// Later writes push; p-2 stays behind, reported by every sync.
	require.NoError(t, bobNotes.Put(ctx, "n-2", Note{Text: "two"}))
	rep = mustSync(t, b)
	assert.Equal(t, 1, rep.Pushed, "n-2")
	assert.Equal(t, rejected, rep.Rejected)
	// Now that it has heard of it, the handle writes no more into payroll.
	err := bobPayroll.Put(ctx, "p-3", Note{Text: "later"})
	assert.ErrorIs(t, err, vault.ErrNoAccess)

	onHub := openPerson(t, personCfg(hub, "olga", "o"))
	verified(t, onHub)
	for _, id := range []string{"n-1", "n-2"} {
		_, err := vault.CollectionOf[Note](onHub, "notes").Get(ctx, id)
		assert.NoError(t, err, id)
	}
	_, err = vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-2")
	assert.ErrorIs(t, err, vault.ErrNotFound)
	for e, err := range onHub.Audit().Read(ctx, 1) {
		require.NoError(t, err)
		assert.False(t, e.Collection == "payroll" && e.ID == "p-2", "the hub's ledger names p-2: %+v", e)
	}
	// bob's device keeps it.
	got, err := bobPayroll.Get(ctx, "p-2")
	require.NoError(t, err)
	assert.Equal(t, "after", got.Text)

	// Given payroll again, bob's device pushes p-2 (re-sealed with the
	// generation he now holds its key of).
	require.NoError(t, a.SetCollections(ctx, "bob", "notes", "payroll"))
	mustSync(t, a)
	rep = mustSync(t, b)
	assert.Equal(t, 1, rep.Pushed, "p-2")
	assert.Empty(t, rep.Rejected)
	assert.Equal(t, vault.SyncReport{}, mustSync(t, b), "nothing left behind")
	onHub = openPerson(t, personCfg(hub, "olga", "o"))
	verified(t, onHub)
	got, err = vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-2")
	require.NoError(t, err)
	assert.Equal(t, "after", got.Text)
}
