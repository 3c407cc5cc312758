package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestCollectionsNarrowedOpenHandle: bob, a writer of notes and payroll,
// keeps a handle open while olga narrows him to notes on the same store.
// The handle's next write into payroll reads the store's current
// generation in its commit (rotate_current.go), which the narrowing
// raised, and must re-seal with it: bob holds no payroll key of that
// generation, so the write is refused with ErrNoAccess (the key's
// absence, not the handle's list of collections, which still names
// payroll: not ErrNotPermitted) and the store is left byte for byte as it
// was. The same handle's writes into notes go on (it loads the notes key
// of the new generation through the commit), and the ledger verifies.
func TestCollectionsNarrowedOpenHandle(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
	bob := openPerson(t, personCfg(st, "bob", "b"))
	require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-1", Note{Text: "before"}))
	verified(t, owner)

	require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
	verified(t, owner)
	before := snapshot(t, st)
	err := vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-2", Note{Text: "after"})
	require.ErrorIs(t, err, vault.ErrNoAccess)
	assert.NotErrorIs(t, err, vault.ErrNotPermitted)
	assert.Equal(t, before, snapshot(t, st), "a refused write changes nothing")
	_, err = vault.CollectionOf[Note](owner, "payroll").Get(ctx, "p-2")
	assert.ErrorIs(t, err, vault.ErrNotFound)

	require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-1", Note{Text: "still mine"}))
	got, err := vault.CollectionOf[Note](owner, "notes").Get(ctx, "n-1")
	require.NoError(t, err)
	assert.Equal(t, "still mine", got.Text)
	verified(t, owner)
}

// TestCollectionsNarrowedOpenHandleHub: bob's device handle, opened before
// olga narrowed him to notes, writes p-2 into payroll and deletes p-1
// before its Sync brings the narrowing (the device's store still names the
// old generation; a file folder names none). His Sync then holds both
// back (he holds no payroll key of the new generation, and may no longer
// change payroll): it reports them in Rejected, keeps them on the device
// unpushed, and pushes his notes, then and later; the hub's ledger verifies
// and has nothing of bob in payroll after the narrowing. Given payroll
// again, his next Sync pushes both. On a file-folder device the stale
// notes record is re-sealed by compare-and-swap (resealCAS).
func TestCollectionsNarrowedOpenHandleHub(t *testing.T) {
	devices := map[string]func(t *testing.T) stores.Store{
		"memstore": func(*testing.T) stores.Store { return memstore.New() },
		"filestore": func(t *testing.T) stores.Store {
			st, err := filestore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			return st
		},
	}
	for name, newDevice := range devices {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), newDevice(t)
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
			onHub := openPerson(t, personCfg(hub, "olga", "o"))
			verified(t, onHub)
			narrowed, err := onHub.Audit().Head(ctx)
			require.NoError(t, err)
			// bob's device has not heard of it.
			require.NoError(t, bobPayroll.Put(ctx, "p-2", Note{Text: "after"}))
			require.NoError(t, bobPayroll.Delete(ctx, "p-1"))
			require.NoError(t, bobNotes.Put(ctx, "n-1", Note{Text: "one"}))

			reason := `collection "payroll" is no longer among the person's (no key of it at generation 3): ` +
				`the change is kept on this device, unpushed, until they are given the collection again`
			rejected := []vault.SyncRejected{{Collection: "payroll", ID: "p-1", Reason: reason, Held: true},
				{Collection: "payroll", ID: "p-2", Reason: reason, Held: true}}
			rep := mustSync(t, b)
			assert.Equal(t, 1, rep.Pushed, "n-1")
			assert.ElementsMatch(t, rejected, rep.Rejected)
			// Later writes push; p-1 and p-2 stay behind, reported by every sync.
			require.NoError(t, bobNotes.Put(ctx, "n-2", Note{Text: "two"}))
			rep = mustSync(t, b)
			assert.Equal(t, 1, rep.Pushed, "n-2")
			assert.ElementsMatch(t, rejected, rep.Rejected)
			// SyncAndSettle syncs twice around its passes: each held change
			// is reported once.
			_, err = vault.NumberingOf(vault.CollectionOf[Note](b, "notes"), "note", sequence.Options{}, func(*Note, sequence.Serial) {})
			require.NoError(t, err)
			rep, err = b.SyncAndSettle(ctx)
			require.NoError(t, err)
			assert.ElementsMatch(t, rejected, rep.Rejected, "SyncAndSettle")
			// Now that it has heard of it, the handle writes no more into payroll.
			assert.ErrorIs(t, bobPayroll.Put(ctx, "p-3", Note{Text: "later"}), vault.ErrNoAccess)

			onHub = openPerson(t, personCfg(hub, "olga", "o"))
			verified(t, onHub)
			for _, id := range []string{"n-1", "n-2"} {
				_, err := vault.CollectionOf[Note](onHub, "notes").Get(ctx, id)
				assert.NoError(t, err, id)
			}
			_, err = vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-2")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			got, err := vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-1")
			require.NoError(t, err)
			assert.Equal(t, "before", got.Text)
			for e, err := range onHub.Audit().Read(ctx, narrowed.Seq+1) {
				require.NoError(t, err)
				assert.False(t, e.Actor == "bob" && e.Collection == "payroll", "bob's payroll entry on the hub: %+v", e)
			}
			// bob's device keeps them.
			got, err = bobPayroll.Get(ctx, "p-2")
			require.NoError(t, err)
			assert.Equal(t, "after", got.Text)
			_, err = bobPayroll.Get(ctx, "p-1")
			assert.ErrorIs(t, err, vault.ErrNotFound)

			// Given payroll again, bob's device pushes them (p-2 re-sealed
			// with the generation he now holds its key of).
			require.NoError(t, a.SetCollections(ctx, "bob", "notes", "payroll"))
			mustSync(t, a)
			assert.Equal(t, vault.SyncReport{Pushed: 2}, mustSync(t, b))
			assert.Equal(t, vault.SyncReport{}, mustSync(t, b), "nothing left behind")
			onHub = openPerson(t, personCfg(hub, "olga", "o"))
			verified(t, onHub)
			got, err = vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-2")
			require.NoError(t, err)
			assert.Equal(t, "after", got.Text)
			_, err = vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-1")
			assert.ErrorIs(t, err, vault.ErrNotFound)
		})
	}
}

// TestSyncRevokedDeviceStops: bob's device handle, opened before olga
// revoked him, writes a note before its Sync hears of it; the Sync then
// fails with ErrNoAccess after the keyring step and pushes nothing, so the
// hub's ledger still verifies and holds no record of bob's after his
// revocation.
func TestSyncRevokedDeviceStops(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "n-1", Note{Text: "before"}))
	assert.Equal(t, vault.SyncReport{Pushed: 1}, mustSync(t, b))

	require.NoError(t, a.Revoke(ctx, "bob"))
	mustSync(t, a)
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "n-2", Note{Text: "after"}))
	before := snapshot(t, hub)
	for range 2 {
		rep, err := b.Sync(ctx)
		require.ErrorIs(t, err, vault.ErrNoAccess)
		assert.Equal(t, vault.SyncReport{}, rep)
	}
	assert.Equal(t, before, snapshot(t, hub), "nothing pushed")
	onHub := openPerson(t, personCfg(hub, "olga", "o"))
	verified(t, onHub)
	_, err := vault.CollectionOf[Note](onHub, "notes").Get(ctx, "n-2")
	assert.ErrorIs(t, err, vault.ErrNotFound)
}

// TestCollectionsNarrowedOpenHandlePulls: after olga narrowed bob to notes
// and wrote into payroll with the new generation, the Sync of bob's device
// handle opened before (whose list of collections still names payroll)
// pulls her notes and leaves her payroll records alone (he cannot open
// them) instead of failing; given payroll again, his next Sync pulls them.
func TestCollectionsNarrowedOpenHandlePulls(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "one"}))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	assert.Equal(t, vault.SyncReport{Pulled: 1}, mustSync(t, b))

	require.NoError(t, a.SetCollections(ctx, "bob", "notes"))
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "one, again"}))
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-2", Note{Text: "two"}))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
	mustSync(t, a)
	assert.Equal(t, vault.SyncReport{Pulled: 1}, mustSync(t, b), "n-1 only")
	got, err := vault.CollectionOf[Note](b, "notes").Get(ctx, "n-1")
	require.NoError(t, err)
	assert.Equal(t, "note", got.Text)

	require.NoError(t, a.SetCollections(ctx, "bob", "notes", "payroll"))
	mustSync(t, a)
	assert.Equal(t, vault.SyncReport{Pulled: 2}, mustSync(t, b), "p-1 and p-2")
	for id, want := range map[string]string{"p-1": "one, again", "p-2": "two"} {
		got, err := vault.CollectionOf[Note](b, "payroll").Get(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, want, got.Text, id)
	}
	verified(t, openPerson(t, personCfg(hub, "olga", "o")))
}

// TestCollectionsNarrowedReaderPulls: the same for rita, a reader of notes
// and payroll: her device handle, opened before olga narrowed her to
// notes, pulls olga's later note and none of her payroll records (sealed
// with the new generation) instead of failing; once olga revokes her, her
// Sync fails with ErrNoAccess and pulls nothing.
func TestCollectionsNarrowedReaderPulls(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader, "notes", "payroll"))
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "one"}))
	mustSync(t, a)
	r := openPerson(t, hubPerson(devB, hub, "rita", "r"))
	assert.Equal(t, vault.SyncReport{Pulled: 1}, mustSync(t, r))

	require.NoError(t, a.SetCollections(ctx, "rita", "notes"))
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-2", Note{Text: "two"}))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
	mustSync(t, a)
	assert.Equal(t, vault.SyncReport{Pulled: 1}, mustSync(t, r), "n-1 only")
	got, err := vault.CollectionOf[Note](r, "notes").Get(ctx, "n-1")
	require.NoError(t, err)
	assert.Equal(t, "note", got.Text)

	require.NoError(t, a.Revoke(ctx, "rita"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-2", Note{Text: "after"}))
	mustSync(t, a)
	rep, err := r.Sync(ctx)
	require.ErrorIs(t, err, vault.ErrNoAccess)
	assert.Equal(t, vault.SyncReport{}, rep)
	_, err = vault.CollectionOf[Note](r, "notes").Get(ctx, "n-2")
	assert.ErrorIs(t, err, vault.ErrNotFound)
}
