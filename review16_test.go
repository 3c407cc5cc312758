package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReview16RegrantBeforeSyncReachesHub: an owner revokes bob on a
// device of a hub and grants him again (a new secret, a new signing key)
// before one Sync. The hub used to keep bob's first entry: its ledger
// named only the first grant, so the copy preferred the entry agreeing
// with it, and bob's new secret opened nothing there. Now the hub's
// ledger records the revocation and the new grant, the hub holds the new
// entry, bob's new handle writes through the hub, his old one is refused,
// and the hub's ledger verifies.
func TestReview16RegrantBeforeSyncReachesHub(t *testing.T) {
	ctx := context.Background()
	for _, rotate := range []bool{false, true} {
		name := "without rotation"
		if rotate {
			name = "with rotation"
		}
		t.Run(name, func(t *testing.T) {
			hub, devA := memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			mustSync(t, a)
			b := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b1", Note{Text: "b"}))
			mustSync(t, b)

			var opts []vault.RevokeOption
			if !rotate {
				opts = append(opts, vault.RevokeWithoutRotation())
			}
			require.NoError(t, a.Revoke(ctx, "bob", opts...))
			if r := a.Rotation(); r != nil {
				require.NoError(t, r.Wait(ctx))
			}
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
			key := keyringKeyOf(t, devA, "bob")
			regranted, err := devA.Get(ctx, key)
			require.NoError(t, err)
			mustSync(t, a)

			onA, err := devA.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, regranted.Value, onA.Value, "device A keeps bob's new entry")
			onHub, err := hub.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, regranted.Value, onHub.Value, "the hub holds bob's new entry")

			// bob's old handle is refused; his new one writes through the hub.
			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b2", Note{Text: "late"}))
			_, err = b.Sync(ctx)
			assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's old handle")
			c := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b2"))
			require.NoError(t, vault.CollectionOf[Note](c, "notes").Put(ctx, "c1", Note{Text: "again"}))
			mustSync(t, c)

			h := openPerson(t, personCfg(hub, "olga", "o"))
			verified(t, h)
			got, err := vault.CollectionOf[Note](h, "notes").Get(ctx, "c1")
			require.NoError(t, err)
			assert.Equal(t, "again", got.Text)
			_, err = vault.CollectionOf[Note](h, "notes").Get(ctx, "b2")
			assert.ErrorIs(t, err, vault.ErrNotFound, "the old handle's write stays off the hub")
			var people []string
			for _, e := range signedBy(t, h) {
				if e.Kind == ledger.PersonGranted || e.Kind == ledger.PersonRevoked {
					people = append(people, e.Actor+" "+e.Kind.String()+" "+e.ID)
				}
			}
			assert.Equal(t, []string{"olga person-granted bob", "olga person-revoked bob", "olga person-granted bob"}, people)
		})
	}
}

// TestReview16RevokedHandlePasses: a writer's handle opened before the
// writer was revoked (or revoked and granted again) runs no numbering
// pass over the records it had put in line: the pass is refused with
// ErrNoAccess before it commits a batch, and the store is left byte for
// byte as it was. A pass used to commit its batch and stamp the records
// (on a store with transactions, where no pre-check runs; on any store
// through the series itself), and only its ledger entries were refused,
// leaving numbers taken without entries; nor does it put a record in
// line (Enqueue). The owner's pass then numbers
// the records 1 and 2, and the ledger verifies.
func TestReview16RevokedHandlePasses(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range numberedStores() {
		for _, mode := range []string{"revoked", "revoked without rotation", "revoked and granted again"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				st := newStore(t)
				olga := openPerson(t, personCfg(st, "olga", "o"))
				require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
				bob := openPerson(t, personCfg(st, "bob", "b"))
				ns := ticketNumbering(t, bob)
				opts := revokeOpts(st)
				if mode != "revoked" {
					opts = []vault.RevokeOption{vault.RevokeWithoutRotation()}
				}
				tickets := vault.CollectionOf[Ticket](bob, "tickets")
				for _, id := range []string{"t-1", "t-2"} {
					require.NoError(t, tickets.Put(ctx, id, Ticket{Subject: id}))
					_, err := ns.Enqueue(ctx, id)
					require.NoError(t, err)
				}

				require.NoError(t, olga.Revoke(ctx, "bob", opts...))
				if r := olga.Rotation(); r != nil {
					require.NoError(t, r.Wait(ctx))
				}
				if mode == "revoked and granted again" {
					require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
				}
				require.NoError(t, vault.CollectionOf[Ticket](olga, "tickets").Put(ctx, "t-3", Ticket{Subject: "t-3"}))
				before := faultstore.Snapshot(snapshotStore(t, st))
				_, err := ns.RunPass(ctx)
				assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's pass")
				_, err = ns.Enqueue(ctx, "t-3")
				assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's enqueue")
				assert.Empty(t, changedKeys(before, snapshotStore(t, st)), "the refused pass wrote nothing")

				rep, err := ticketNumbering(t, olga).RunPass(ctx)
				require.NoError(t, err)
				assert.Equal(t, uint64(1), rep.First)
				assert.Equal(t, uint64(2), rep.Last)
				for i, id := range []string{"t-1", "t-2"} {
					got, err := vault.CollectionOf[Ticket](olga, "tickets").Get(ctx, id)
					require.NoError(t, err)
					assert.Equal(t, uint64(i+1), got.No, id)
				}
				verified(t, olga)
			})
		}
	}
}

// TestReview16RevokedHandleSettlesNothingOnHub: bob, on a device of a hub,
// put numbered records and pushed them; olga revoked him and synced. His
// handle's Settle, which runs the pass on the hub, is refused with
// ErrNoAccess and writes nothing on the hub (no handoff entry copied, no
// batch); olga's Settle numbers bob's pushed records 1 and 2 and the
// hub's ledger verifies.
func TestReview16RevokedHandleSettlesNothingOnHub(t *testing.T) {
	ctx := context.Background()
	for _, rotate := range []bool{false, true} {
		name := "without rotation"
		if rotate {
			name = "with rotation"
		}
		t.Run(name, func(t *testing.T) {
			hub := memstore.New()
			a := openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			mustSync(t, a)
			b := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
			_, h := stubsOf(t, b)
			for _, id := range []string{"t-1", "t-2"} {
				_, err := h.Put(ctx, id, Stub{})
				require.NoError(t, err)
			}
			mustSync(t, b)

			var opts []vault.RevokeOption
			if !rotate {
				opts = append(opts, vault.RevokeWithoutRotation())
			}
			require.NoError(t, a.Revoke(ctx, "bob", opts...))
			if r := a.Rotation(); r != nil {
				require.NoError(t, r.Wait(ctx))
			}
			mustSync(t, a)
			before := faultstore.Snapshot(snapshotStore(t, hub))
			_, err := h.Settle(ctx)
			assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's settle")
			assert.Empty(t, changedKeys(before, snapshotStore(t, hub)), "the refused settle wrote nothing on the hub")

			_, ha := stubsOf(t, a)
			rep, err := ha.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, [2]uint64{1, 2}, [2]uint64{rep.First, rep.Last}, "olga's pass numbers bob's pushed records")
			verified(t, openPerson(t, personCfg(hub, "olga", "o")))
		})
	}
}

// TestReview16StaleOwnerChangesNothing: otto (an owner) and bob (a
// writer) were revoked by olga and granted again, with new secrets and
// new signing keys. Their handles opened before keep the old keys: every
// change of people or keys they attempt (a grant, a revocation, a change
// of collections, a rotation, recovery codes, a secret change, even with
// the new secret) fails with ErrNoAccess and writes nothing. The old
// owner handle passed checkStillHeld (not revoked, still an owner) and,
// on a store without transactions, wrote the keyring entry before the
// ledger's guard refused its entry; a secret change with the new secret
// did the same for any person. The new handles then change people, and
// the ledger verifies.
func TestReview16StaleOwnerChangesNothing(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range numberedStores() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "otto", vault.Secret([]byte("t")), vault.RoleOwner))
			require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			require.NoError(t, olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
			otto := openPerson(t, personCfg(st, "otto", "t"))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			for _, p := range []string{"otto", "bob"} {
				require.NoError(t, olga.Revoke(ctx, p, vault.RevokeWithoutRotation()))
			}
			require.NoError(t, olga.Grant(ctx, "otto", vault.Secret([]byte("t2")), vault.RoleOwner))
			require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
			before := faultstore.Snapshot(snapshotStore(t, st))

			_, ottoCodes := otto.RecoveryCodes(ctx, 1)
			_, bobCodes := bob.RecoveryCodes(ctx, 1)
			errs := map[string]error{
				"otto's grant":         otto.Grant(ctx, "eve", vault.Secret([]byte("e")), vault.RoleOwner),
				"otto's revocation":    otto.Revoke(ctx, "rita", vault.RevokeWithoutRotation()),
				"otto's codes":         ottoCodes,
				"otto's code revoke":   otto.RevokeRecoveryCodes(ctx),
				"otto's secret change": otto.ChangeSecret(ctx, []byte("t2"), []byte("t3")),
				"bob's codes":          bobCodes,
				"bob's code revoke":    bob.RevokeRecoveryCodes(ctx),
				"bob's secret change":  bob.ChangeSecret(ctx, []byte("b2"), []byte("b3")),
			}
			if st.Capabilities().Transactions {
				_, rotErr := otto.RotateKeys(ctx)
				errs["otto's rotation"] = rotErr
				errs["otto's narrowing"] = otto.SetCollections(ctx, "rita", "notes")
				errs["otto's limited grant"] = otto.Grant(ctx, "eve", vault.Secret([]byte("e")), vault.RoleWriter, "notes")
			}
			for what, err := range errs {
				assert.ErrorIs(t, err, vault.ErrNoAccess, what)
			}
			assert.Empty(t, changedKeys(before, snapshotStore(t, st)), "the refused calls wrote nothing")
			verified(t, olga)

			otto2 := openPerson(t, personCfg(st, "otto", "t2"))
			require.NoError(t, otto2.Grant(ctx, "eve", vault.Secret([]byte("e")), vault.RoleWriter))
			bob2 := openPerson(t, personCfg(st, "bob", "b2"))
			require.NoError(t, bob2.ChangeSecret(ctx, []byte("b2"), []byte("b3")))
			verified(t, olga)
		})
	}
}

// TestReview16RevokedHandleSyncsNothingFromFiles: bob's handle on a device
// whose store has no transactions (a file folder), opened before olga
// revoked him (or revoked him and granted him again) on another device.
// His Sync brings the keyring change and then fails with ErrNoAccess: it
// pushes nothing to the hub and pulls nothing onto the device (only the
// keyring entries it copied change there). A handle whose person was
// granted again used to pass the check of the keyring step (the entry is
// not revoked) and go on to pull and push.
func TestReview16RevokedHandleSyncsNothingFromFiles(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"revoked", "revoked and granted again"} {
		t.Run(mode, func(t *testing.T) {
			hub := memstore.New()
			a := openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			mustSync(t, a)
			dev := openFileStore(t, t.TempDir())
			b := openPerson(t, hubPerson(dev, hub, "bob", "b"))
			notes := vault.CollectionOf[Note](b, "notes")
			require.NoError(t, notes.Put(ctx, "b1", Note{Text: "b"}))
			mustSync(t, b)
			require.NoError(t, notes.Put(ctx, "b2", Note{Text: "before"}))

			require.NoError(t, a.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
			if mode == "revoked and granted again" {
				mustSync(t, a)
				require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
			}
			require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "a1", Note{Text: "a"}))
			mustSync(t, a)

			hubBefore := faultstore.Snapshot(snapshotStore(t, hub))
			devBefore := faultstore.Snapshot(snapshotStore(t, dev))
			_, err := b.Sync(ctx)
			assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's sync")
			assert.Empty(t, changedKeys(hubBefore, snapshotStore(t, hub)), "nothing pushed")
			for _, k := range changedKeys(devBefore, snapshotStore(t, dev)) {
				assert.Contains(t, k, "/_keyring/", "only keyring entries change on the device")
			}
			verified(t, openPerson(t, personCfg(hub, "olga", "o")))
		})
	}
}

// TestReview16RacingWriteWithoutTransactions pins down what the docs say
// of a store without transactions: a write whose record lands just before
// a revocation commits, and whose ledger entry comes after it, keeps its
// record, gets no ledger entry (its commit is refused with ErrNoAccess),
// and Verify, which walks the ledger only, does not see it.
func TestReview16RacingWriteWithoutTransactions(t *testing.T) {
	ctx := context.Background()
	var (
		olga, bob *vault.Vault
		revoked   bool
	)
	st := faultstore.New(memstore.New(), faultstore.Options{
		HideTransactor: true,
		After: func(op faultstore.Op, key string) error {
			if !revoked && strings.HasSuffix(key, "/notes/racing") {
				revoked = true // the hook runs in bob's Put, on this goroutine
				require.NoError(t, olga.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
			}
			return nil
		},
	})
	olga = openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	bob = openPerson(t, personCfg(st, "bob", "b"))
	head, err := olga.Audit().Head(ctx)
	require.NoError(t, err)

	err = vault.CollectionOf[Note](bob, "notes").Put(ctx, "racing", Note{Text: "late"})
	assert.ErrorIs(t, err, vault.ErrNoAccess, "the write's ledger commit")
	require.True(t, revoked)
	got, err := vault.CollectionOf[Note](olga, "notes").Get(ctx, "racing")
	require.NoError(t, err, "the record stays")
	assert.Equal(t, "late", got.Text)
	var after []string
	for e, err := range olga.Audit().Read(ctx, head.Seq+1) {
		require.NoError(t, err)
		after = append(after, e.Actor+" "+e.Kind.String()+" "+e.ID)
	}
	assert.Equal(t, []string{"olga person-revoked bob"}, after, "no entry for the racing write")
	verified(t, olga)
}
