package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestCollectionsNarrowedFromAllOpenHandle: bob, a writer given every
// collection (he holds every generation's data key), keeps a handle open
// on the store while olga narrows him to notes there, which makes a
// generation he gets only the notes key of. His handle's next write reads
// that generation in its commit; loading his keyring entry for it, the
// handle learns he is now limited to notes and goes on as one opened
// after the narrowing would: his notes write succeeds, his payroll write
// is refused with ErrNotPermitted (payroll is no longer in the handle's
// list, as in a reopened one's) and changes nothing, and the ledger
// verifies.
func TestCollectionsNarrowedFromAllOpenHandle(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-1", Note{Text: "before"}))

			require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
			verified(t, owner)

			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-1", Note{Text: "still mine"}))
			got, err := vault.CollectionOf[Note](owner, "notes").Get(ctx, "n-1")
			require.NoError(t, err)
			assert.Equal(t, "still mine", got.Text)

			before := snapshot(t, st)
			err = vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-2", Note{Text: "after"})
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			assert.Equal(t, before, snapshot(t, st), "a refused write changes nothing")
			// A handle opened now refuses it the same way.
			reopened := openPerson(t, personCfg(st, "bob", "b"))
			assert.ErrorIs(t, vault.CollectionOf[Note](reopened, "payroll").Put(ctx, "p-2", Note{Text: "after"}), vault.ErrNotPermitted)
			_, err = vault.CollectionOf[Note](owner, "payroll").Get(ctx, "p-2")
			assert.ErrorIs(t, err, vault.ErrNotFound)

			// The stale handle reads the notes key of the new generation.
			require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "n-2", Note{Text: "from olga"}))
			got, err = vault.CollectionOf[Note](bob, "notes").Get(ctx, "n-2")
			require.NoError(t, err)
			assert.Equal(t, "from olga", got.Text)
			verified(t, owner)
		})
	}
}

// TestCollectionsNarrowedFromAllOpenHandleHub: bob, given every
// collection, has a device handle open while olga, on another device,
// narrows him to notes (a new generation, generation 2, of which he gets
// the notes key only) and syncs. Before his Sync hears of it he writes
// p-2 into payroll and n-1 into notes. His Sync then learns from his
// keyring entry that he is limited to notes and goes on as a handle
// opened after the narrowing would: it pushes n-1, holds p-2 back and
// reports it in Rejected; his later payroll writes are refused
// (ErrNotPermitted), his notes writes push, and the hub's ledger verifies
// without p-2.
func TestCollectionsNarrowedFromAllOpenHandleHub(t *testing.T) {
	for name, newDevice := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), newDevice(t)
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
			bobPayroll, bobNotes := vault.CollectionOf[Note](b, "payroll"), vault.CollectionOf[Note](b, "notes")
			require.NoError(t, bobPayroll.Put(ctx, "p-1", Note{Text: "before"}))
			assert.Equal(t, vault.SyncReport{Pushed: 1}, mustSync(t, b))

			require.NoError(t, a.SetCollections(ctx, "bob", "notes"))
			mustSync(t, a)
			// bob's device has not heard of it.
			require.NoError(t, bobPayroll.Put(ctx, "p-2", Note{Text: "after"}))
			require.NoError(t, bobNotes.Put(ctx, "n-1", Note{Text: "one"}))

			reason := `collection "payroll" is no longer among the person's (no key of it at generation 2): ` +
				`the change is kept on this device, unpushed, until they are given the collection again`
			rejected := []vault.SyncRejected{{Collection: "payroll", ID: "p-2", Reason: reason, Held: true}}
			rep := mustSync(t, b)
			assert.Equal(t, 1, rep.Pushed, "n-1")
			assert.Equal(t, rejected, rep.Rejected)

			assert.ErrorIs(t, bobPayroll.Put(ctx, "p-3", Note{Text: "later"}), vault.ErrNotPermitted)
			require.NoError(t, bobNotes.Put(ctx, "n-2", Note{Text: "two"}))
			rep = mustSync(t, b)
			assert.Equal(t, 1, rep.Pushed, "n-2")
			assert.Equal(t, rejected, rep.Rejected)

			onHub := openPerson(t, personCfg(hub, "olga", "o"))
			verified(t, onHub)
			for _, id := range []string{"n-1", "n-2"} {
				_, err := vault.CollectionOf[Note](onHub, "notes").Get(ctx, id)
				assert.NoError(t, err, id)
			}
			_, err := vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-2")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			got, err := vault.CollectionOf[Note](onHub, "payroll").Get(ctx, "p-1")
			require.NoError(t, err)
			assert.Equal(t, "before", got.Text)
			// olga's device gets bob's notes. bob's device keeps p-2 (the
			// second Sync reported it again), which his handle, like one
			// opened now, may no longer read.
			mustSync(t, a)
			got, err = vault.CollectionOf[Note](a, "notes").Get(ctx, "n-2")
			require.NoError(t, err)
			assert.Equal(t, "two", got.Text)
			_, err = bobPayroll.Get(ctx, "p-2")
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			reopened := openPerson(t, hubPerson(devB, hub, "bob", "b"))
			_, err = vault.CollectionOf[Note](reopened, "payroll").Get(ctx, "p-2")
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			assert.Equal(t, vault.SyncReport{Rejected: rejected}, mustSync(t, reopened))
		})
	}
}
