package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// kindsBy returns, for each kind of entry in es, the set of its authors.
func kindsBy(es []ledger.Entry) map[ledger.Kind]map[string]bool {
	out := map[ledger.Kind]map[string]bool{}
	for _, e := range es {
		if out[e.Kind] == nil {
			out[e.Kind] = map[string]bool{}
		}
		out[e.Kind][e.Actor] = true
	}
	return out
}

// TestSigningEveryWritePath: on every store (memstore, badger, the file
// store, PostgreSQL), each way the SDK appends to a vault's ledger leaves
// entries signed by their author, or covered by the signature of their
// commit's last entry: records put and deleted, an application event,
// numbers taken, seeded and voided, a series bound, a numbered handle (numbered at write
// time, or by a deferred pass on the file store), grants, a writer's and
// a reader's own secret change, recovery codes issued, used and revoked,
// a rotation with its re-sealing (on stores with transactions), a
// revocation. Each entry names its
// author, and the ledger verifies from every person's handle.
func TestSigningEveryWritePath(t *testing.T) {
	for name, newStore := range numberedStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			notes := vault.CollectionOf[Note](olga, "notes")
			require.NoError(t, notes.Put(ctx, "a", Note{Text: "a"}))
			require.NoError(t, notes.Put(ctx, "gone", Note{Text: "g"}))
			require.NoError(t, notes.Delete(ctx, "gone"))
			_, err := olga.Record(ctx, "login", []byte("from the test"))
			require.NoError(t, err)

			// The file store takes no bare numbers: only a numbered
			// handle's, by a pass.
			bare := name != "filestore"
			if bare {
				q := mustSeq(t, olga, "inv")
				nextN(t, q, 3)
				require.NoError(t, q.SeedTo(ctx, 10))
				n, err := q.Next(ctx)
				require.NoError(t, err)
				require.NoError(t, q.Void(ctx, n, "typo"))
				require.NoError(t, olga.BindSeries(ctx, "invoices", "inv"))
			}

			_, h := stubsOf(t, olga)
			r, err := h.Put(ctx, "t1", Stub{Total: 1})
			require.NoError(t, err)
			if r.Pending {
				_, err = h.Settle(ctx)
				require.NoError(t, err)
			}

			require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			require.NoError(t, olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "b", Note{Text: "b"}))
			if bare {
				nextN(t, mustSeq(t, bob, "inv"), 1)
			}
			require.NoError(t, bob.ChangeSecret(ctx, []byte("b"), []byte("b2")))

			rita := openPerson(t, personCfg(st, "rita", "r"))
			require.NoError(t, rita.ChangeSecret(ctx, []byte("r"), []byte("r2")))
			codes, err := rita.RecoveryCodes(ctx, 2)
			require.NoError(t, err)
			require.NoError(t, rita.Close())
			rita = openPerson(t, recoverCfg(st, "rita", codes[0], "r3"))
			require.NoError(t, rita.RevokeRecoveryCodes(ctx))

			if bare { // rotations need transactions
				rot, err := olga.RotateKeys(ctx)
				require.NoError(t, err)
				require.NoError(t, rot.Wait(ctx))
				require.NoError(t, olga.Revoke(ctx, "bob"))
				require.NoError(t, olga.Rotation().Wait(ctx))
			} else {
				require.NoError(t, olga.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
			}

			es := signedBy(t, olga)
			got := kindsBy(es)
			want := map[ledger.Kind]map[string]bool{
				ledger.RecordPut:            {"olga": true, "bob": true},
				ledger.RecordDelete:         {"olga": true},
				ledger.AppEvent:             {"olga": true},
				ledger.NumberAllocated:      {"olga": true, "bob": true},
				ledger.SeriesSeeded:         {"olga": true},
				ledger.NumberVoided:         {"olga": true},
				ledger.PersonGranted:        {"olga": true},
				ledger.SecretChanged:        {"bob": true, "rita": true},
				ledger.RecoveryCodesIssued:  {"rita": true},
				ledger.RecoveryCodeUsed:     {"rita": true},
				ledger.RecoveryCodesRevoked: {"rita": true},
				ledger.KeysRenewed:          {"bob": true, "rita": true},
				ledger.PersonRevoked:        {"olga": true},
				ledger.KeysRotated:          {"olga": true},
				ledger.KeysResealed:         {"olga": true},
				ledger.SeriesBound:          {"olga": true},
			}
			if !bare {
				delete(want, ledger.SeriesSeeded)
				delete(want, ledger.NumberVoided)
				delete(want, ledger.KeysRotated)
				delete(want, ledger.KeysResealed)
				delete(want, ledger.SeriesBound)
				delete(want, ledger.NumberAllocated) // the pass writes NumberAssigned
			}
			for k, actors := range want {
				assert.Equal(t, actors, got[k], "authors of %s entries", k)
			}
			if name == "filestore" {
				assert.Equal(t, map[string]bool{"olga": true}, got[ledger.NumberAssigned], "the deferred pass's entries")
			}
			for k := range got {
				if _, ok := want[k]; !ok && k != ledger.NumberAssigned && k != ledger.SeriesDefined {
					t.Errorf("unexpected %s entries by %v", k, got[k])
				}
			}
			verified(t, olga)
			verified(t, rita)
		})
	}
}

// TestSigningSyncPaths: the entries a sync appends (pulled records and
// deletions, the conflicts it settles, the hub-side entries of every
// device's pushes) and the numbers a hub's device takes on the hub are
// signed by the person of the device that syncs,
// and every ledger, the hub's included, verifies.
func TestSigningSyncPaths(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub := memstore.New()
			a := openPerson(t, hubPerson(newStore(t), hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			na := vault.CollectionOf[Note](a, "notes")
			require.NoError(t, na.Put(ctx, "x", Note{Text: "base"}))
			require.NoError(t, na.Put(ctx, "y", Note{Text: "to delete"}))
			mustSync(t, a)
			b := openPerson(t, hubPerson(newStore(t), hub, "bob", "b"))
			mustSync(t, b)
			nb := vault.CollectionOf[Note](b, "notes")

			// Both edit x; a deletes y; b syncs after a: a conflict on b.
			require.NoError(t, na.Put(ctx, "x", Note{Text: "A"}))
			require.NoError(t, na.Delete(ctx, "y"))
			require.NoError(t, nb.Put(ctx, "x", Note{Text: "B"}))
			require.NoError(t, nb.Put(ctx, "z", Note{Text: "bob's own"}))
			mustSync(t, a)
			mustSync(t, b)
			mustSync(t, a)
			// Numbers of a hub's device are taken on the hub.
			nextN(t, mustSeq(t, a, "inv"), 1)
			nextN(t, mustSeq(t, b, "inv"), 2)

			kb := kindsBy(signedBy(t, b))
			assert.Equal(t, map[string]bool{"bob": true}, kb[ledger.RecordPulled], "b's pulls")
			assert.Equal(t, map[string]bool{"bob": true}, kb[ledger.RecordPulledDelete], "b's pulled deletion")
			assert.Equal(t, map[string]bool{"bob": true}, kb[ledger.SyncConflict], "b's conflict")
			for k, actors := range kindsBy(signedBy(t, a)) {
				assert.Equal(t, map[string]bool{"olga": true}, actors, "%s entries on a's device", k)
			}
			verified(t, a)
			verified(t, b)

			onHub := openPerson(t, personCfg(hub, "olga", "o"))
			kh := kindsBy(signedBy(t, onHub))
			assert.Equal(t, map[string]bool{"olga": true, "bob": true}, kh[ledger.RecordPut], "the hub's feed has both devices' pushes")
			assert.Equal(t, map[string]bool{"olga": true, "bob": true}, kh[ledger.NumberAllocated], "numbers taken on the hub")
			verified(t, onHub)
		})
	}
}

// TestSigningWriterRevokes: a writer's revocation of the owner, appended
// through the writer's own vault ledger and signed with the writer's key,
// fails Verify: only owners change people. (A reader's forgeries, made
// with the raw store since the reader's vault writes nothing, are in
// vault/signing_internal_test.go.)
func TestSigningWriterRevokes(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	writer := openPerson(t, personCfg(st, "will", "w"))
	rep, err := owner.Audit().Verify(ctx)
	require.NoError(t, err)
	_, err = vaultLedger(writer).Append(ctx, ledger.Entry{Kind: ledger.PersonRevoked, ID: "olga"})
	require.NoError(t, err)
	badEntry(t, owner, rep.Head.Seq+1, ledger.NotPermitted)
}

// TestSigningHubRevocation: a revocation reaches the hub's ledger, not
// only its keyring. bob's device handle, opened before olga revoked him,
// keeps writing, but its Sync, once it brings the revocation, fails with
// ErrNoAccess and pushes nothing. A handle of bob's that writes on the hub
// anyway (opened there before the revocation, which did not rotate: it
// holds every key) is caught by the hub's ledger, which holds olga's
// revocation at the position her sync reached the hub: Verify fails at
// bob's first entry after it. His entries before it verify; a second sync
// of olga's records the revocation no second time.
func TestSigningHubRevocation(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub := memstore.New()
			a := openPerson(t, hubPerson(newStore(t), hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			mustSync(t, a)
			b := openPerson(t, hubPerson(newStore(t), hub, "bob", "b"))
			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b1", Note{Text: "b"}))
			mustSync(t, b)
			bobOnHub := openPerson(t, personCfg(hub, "bob", "b"))
			held, err := hub.Get(ctx, keyringKeyOf(t, hub, "bob"))
			require.NoError(t, err)
			before := held.Value
			require.NoError(t, a.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
			mustSync(t, a)
			mustSync(t, a)

			onHub := openPerson(t, personCfg(hub, "olga", "o"))
			var revocations []string
			for _, e := range signedBy(t, onHub) {
				if e.Kind == ledger.PersonRevoked {
					revocations = append(revocations, e.Actor+" "+e.ID)
				}
			}
			assert.Equal(t, []string{"olga bob"}, revocations, "one revocation, by olga, on the hub's ledger")
			rep, err := onHub.Audit().Verify(ctx)
			require.NoError(t, err)

			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b2", Note{Text: "late"}))
			_, err = b.Sync(ctx)
			require.ErrorIs(t, err, vault.ErrNoAccess)
			after, err := onHub.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.Equal(t, rep.Head, after.Head, "nothing pushed")
			// bob's handle on the hub, opened before the revocation, is
			// refused its write: it appends nothing.
			err = vault.CollectionOf[Note](bobOnHub, "notes").Put(ctx, "b3", Note{Text: "late"})
			require.ErrorIs(t, err, vault.ErrNoAccess)
			still, err := onHub.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.Equal(t, rep.Head, still.Head, "the refused write appended nothing")

			// A hub that serves bob's keyring entry as it was before the
			// revocation lets the write through; Verify still names it.
			key := keyringKeyOf(t, hub, "bob")
			revoked, err := hub.Get(ctx, key)
			require.NoError(t, err)
			_, err = hub.Put(ctx, key, before)
			require.NoError(t, err)
			require.NoError(t, vault.CollectionOf[Note](bobOnHub, "notes").Put(ctx, "b3", Note{Text: "late"}))
			_, err = hub.Put(ctx, key, revoked.Value)
			require.NoError(t, err)
			badEntry(t, onHub, rep.Head.Seq+1, ledger.Revoked)
		})
	}
}

// TestSigningHubRegrant: a person revoked and granted again (a new
// secret, a new signing key) writes through the hub again: olga's syncs
// record on the hub's ledger the grant, the revocation and the re-grant,
// each key at its position, and the hub's ledger verifies with bob's
// entries signed by his first key before the revocation and by his second
// after the re-grant (the keyring holds only the second).
func TestSigningHubRegrant(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	a := openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "a1", Note{Text: "a"}))
	mustSync(t, a)
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	mustSync(t, a)
	b := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b1", Note{Text: "b"}))
	mustSync(t, b)
	require.NoError(t, b.Close())
	require.NoError(t, a.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
	mustSync(t, a)
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
	mustSync(t, a)
	mustSync(t, a)

	c := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b2"))
	require.NoError(t, vault.CollectionOf[Note](c, "notes").Put(ctx, "b2", Note{Text: "again"}))
	mustSync(t, c)

	onHub := openPerson(t, personCfg(hub, "olga", "o"))
	var people []string
	for _, e := range signedBy(t, onHub) {
		switch e.Kind {
		case ledger.PersonRevoked, ledger.PersonGranted, ledger.RecordPut:
			people = append(people, e.Actor+" "+e.Kind.String()+" "+e.ID)
		}
	}
	assert.Equal(t, []string{"olga record-put a1", "olga person-granted bob", "bob record-put b1",
		"olga person-revoked bob", "olga person-granted bob", "bob record-put b2"}, people)
	verified(t, onHub)
	verified(t, c)
}

// TestSigningKeyringPutBack: a store that puts back a revoked person's
// keyring entry as it was before the revocation does not let their secret
// open the vault again: the ledger holds the revocation, signed by the
// owner, so the person is revoked whatever the entry says (ErrNoAccess). A handle of theirs opened before the revocation
// sees the entry as not revoked and writes, but what it writes fails
// Verify, at the revocation's position.
func TestSigningKeyringPutBack(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			before, err := st.Get(ctx, "v/team/_keyring/bob")
			require.NoError(t, err)
			require.NoError(t, owner.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
			_, err = vault.Open(ctx, personCfg(st, "bob", "b"))
			require.ErrorIs(t, err, vault.ErrNoAccess)
			rep, err := owner.Audit().Verify(ctx)
			require.NoError(t, err)

			_, err = st.Put(ctx, "v/team/_keyring/bob", before.Value)
			require.NoError(t, err)
			_, err = vault.Open(ctx, personCfg(st, "bob", "b"))
			require.ErrorIs(t, err, vault.ErrNoAccess, "the entry put back opens")
			require.NotErrorIs(t, err, vault.ErrTampered)
			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "back", Note{Text: "again"}))
			badEntry(t, owner, rep.Head.Seq+1, ledger.Revoked)
		})
	}
}

// keyringKeyOf returns the store key of user's keyring entry in st.
func keyringKeyOf(t *testing.T, st stores.Store, user string) string {
	t.Helper()
	var found []string
	for it, err := range st.List(context.Background(), "") {
		require.NoError(t, err)
		if strings.HasSuffix(it.Key, "/_keyring/"+user) {
			found = append(found, it.Key)
		}
	}
	require.Len(t, found, 1, "one keyring entry of %q", user)
	return found[0]
}
