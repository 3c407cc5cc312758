package noydb_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// TestReview17PGUpdateNoDeadlocks: on PostgreSQL, one handle writes records
// in vault.Update transactions while another handle of the vault (another
// process, say) puts records plainly. No transaction deadlocks, and every
// record of both is there.
func TestReview17PGUpdateNoDeadlocks(t *testing.T) {
	ctx := context.Background()
	st := &deadlockCounter{Store: pgtest.Open(t, nil)}
	first := openPerson(t, personCfg(st, "olga", "o"))
	second := openPerson(t, personCfg(st, "olga", "o"))
	const perWorker = 40
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			notes := vault.CollectionOf[Note](first, "notes")
			for i := range perWorker {
				err := first.Update(ctx, func(tx *vault.Tx) error {
					return notes.In(tx).Put(fmt.Sprintf("u%d-%03d", w, i), Note{Text: "u"})
				})
				if !assert.NoError(t, err, "update") {
					return
				}
			}
		})
		wg.Go(func() {
			notes := vault.CollectionOf[Note](second, "notes")
			for i := range perWorker {
				if !assert.NoError(t, notes.Put(ctx, fmt.Sprintf("p%d-%03d", w, i), Note{Text: "p"}), "put") {
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("deadlocks: %d", st.deadlocks.Load())
	assert.Zero(t, st.deadlocks.Load(), "transactions PostgreSQL ended as deadlocked")
	var want, got []string
	for w := range 2 {
		for i := range perWorker {
			want = append(want, fmt.Sprintf("u%d-%03d", w, i), fmt.Sprintf("p%d-%03d", w, i))
		}
	}
	for r, err := range vault.CollectionOf[Note](first, "notes").List(ctx) {
		require.NoError(t, err)
		got = append(got, r.ID)
	}
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got)
	rep, err := first.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.NoError(t, rep.Problem)
}

// TestUpdatePullAndResolveLockInKeyOrder: a vault.Update writing records, a sync pull that
// applies the hub's records on a device (and keeps a conflict), and
// Resolve of that conflict lock the current generation with the ledger's
// head, in key order, and not after the records they write (see
// lockOrderStore for the model of pgstore's locks). Before the fix each of
// them locked _generation after the head and the records (and the pull
// _sync/pull after the records): PostgreSQL then deadlocks them against any
// plain Put of another handle, which locks _generation first.
func TestUpdatePullAndResolveLockInKeyOrder(t *testing.T) {
	ctx := context.Background()
	st := &lockOrderStore{Store: memstore.New()}
	v := openPerson(t, personCfg(st, "olga", "o"))
	notes := vault.CollectionOf[Note](v, "notes")
	require.NoError(t, notes.Put(ctx, "a", Note{Text: "x"}))
	st.outOfOrder()
	require.NoError(t, v.Update(ctx, func(tx *vault.Tx) error {
		if err := notes.In(tx).Put("b", Note{Text: "y"}); err != nil {
			return err
		}
		return notes.In(tx).Put("c", Note{Text: "z"})
	}))
	assert.Empty(t, st.outOfOrder(), "vault.Update: keys locked out of order")

	hub, devA, devB := &lockOrderStore{Store: memstore.New()}, memstore.New(), &lockOrderStore{Store: memstore.New()}
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	require.NoError(t, b.SetConflictPolicy("notes", vault.Manual))
	na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
	require.NoError(t, na.PutMany(ctx, map[string]Note{"x": {Text: "a"}, "y": {Text: "a"}}))
	mustSync(t, a)
	devB.outOfOrder()
	mustSync(t, b)
	assert.Empty(t, devB.outOfOrder(), "sync pull: keys locked out of order")
	require.NoError(t, na.Put(ctx, "x", Note{Text: "a2"}))
	mustSync(t, a)
	require.NoError(t, nb.Put(ctx, "x", Note{Text: "b2"}))
	devB.outOfOrder()
	rep := mustSync(t, b)
	require.Len(t, rep.Conflicts, 1)
	assert.Empty(t, devB.outOfOrder(), "sync pull keeping a conflict: keys locked out of order")
	require.NoError(t, nb.Resolve(ctx, "x", &Note{Text: "both"}))
	assert.Empty(t, devB.outOfOrder(), "resolve: keys locked out of order")
	assert.Empty(t, hub.outOfOrder(), "hub: keys locked out of order")
}

// TestReview17RevokedHandleResolvesNothing: on a device without
// transactions, a handle whose person was revoked (the revocation brought
// by its refused Sync) cannot Resolve a kept conflict: ErrNoAccess, and the
// device store is left as it was. Before, the staged commit wrote the
// record and its intent, and only the ledger append was refused: a record
// by a revoked person, and an intent that the next commit on the device
// finishes with entries signed by whoever makes it.
func TestReview17RevokedHandleResolvesNothing(t *testing.T) {
	ctx := context.Background()
	hub, devA := memstore.New(), memstore.New()
	devB := openFileStore(t, t.TempDir())
	olga := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	mustSync(t, olga)
	bob := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	require.NoError(t, bob.SetConflictPolicy("notes", vault.Manual))
	na, nb := vault.CollectionOf[Note](olga, "notes"), vault.CollectionOf[Note](bob, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{Text: "a"}))
	mustSync(t, olga)
	mustSync(t, bob)
	require.NoError(t, na.Put(ctx, "x", Note{Text: "a2"}))
	mustSync(t, olga)
	require.NoError(t, nb.Put(ctx, "x", Note{Text: "b2"}))
	require.Len(t, mustSync(t, bob).Conflicts, 1)

	require.NoError(t, olga.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
	mustSync(t, olga)
	_, err := bob.Sync(ctx)
	require.ErrorIs(t, err, vault.ErrNoAccess, "bob's sync brings his revocation")
	before := faultstore.Snapshot(snapshotStore(t, devB))
	assert.ErrorIs(t, nb.Resolve(ctx, "x", &Note{Text: "both"}), vault.ErrNoAccess)
	assert.ErrorIs(t, nb.Resolve(ctx, "x", nil), vault.ErrNoAccess)
	assert.Empty(t, changedKeys(before, snapshotStore(t, devB)), "the refused calls wrote nothing")
}

// TestPutNumberedOnADeviceLocksInKeyOrder: Collection.PutNumbered on a device
// commits on the hub, then copies the record to the device with its sync
// base in one commit, which locks the base with the record, in key order.
// Before the fix the base, written blind, was locked after the record.
func TestPutNumberedOnADeviceLocksInKeyOrder(t *testing.T) {
	ctx := context.Background()
	hub, dev := &lockOrderStore{Store: memstore.New()}, &lockOrderStore{Store: memstore.New()}
	d := openPerson(t, hubPerson(dev, hub, "olga", "o"))
	mustSync(t, d)
	hub.outOfOrder()
	dev.outOfOrder()
	seq, err := d.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = vault.CollectionOf[Receipt](d, "invoices").PutNumbered(ctx, "i1", seq, func(s sequence.Serial) (Receipt, error) {
		return Receipt{Number: s.N}, nil
	})
	require.NoError(t, err)
	assert.Empty(t, hub.outOfOrder(), "hub: keys locked out of order")
	assert.Empty(t, dev.outOfOrder(), "device: keys locked out of order")
}
