package noydb_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// signedBy asserts that every entry of v's ledger is signed, or covered
// by the signature of its commit's last entry, or, before the vault's
// first grant, Chained (a vault of one person), that the last entry is
// not Covered, and returns the entries.
func signedBy(t *testing.T, v *vault.Vault) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	shared := false
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		shared = shared || e.Kind == ledger.PersonGranted
		if e.Chained {
			assert.False(t, shared, "entry %d is Chained after a grant", e.Seq)
		} else if e.Covered {
			assert.Empty(t, e.Signature, "entry %d", e.Seq)
		} else {
			assert.Len(t, e.Signature, 64, "entry %d", e.Seq)
		}
		out = append(out, e)
	}
	if assert.NotEmpty(t, out) {
		assert.False(t, out[len(out)-1].Covered, "the last entry ends a commit")
	}
	return out
}

// badEntry asserts that v's ledger fails Verify at seq with problem.
func badEntry(t *testing.T, v *vault.Vault, seq uint64, problem ledger.SignatureProblem) {
	t.Helper()
	rep, err := v.Audit().Verify(context.Background())
	require.ErrorIs(t, err, ledger.ErrBadSignature)
	assert.ErrorIs(t, err, vault.ErrTampered)
	var se *ledger.SignatureError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, seq, se.Seq)
	assert.Equal(t, problem, se.Problem, "%v", err)
	assert.Equal(t, seq, rep.FirstBad)
}

// signingKeyOf returns the signing key the keyring holds for user.
func signingKeyOf(t *testing.T, v *vault.Vault, user string) []byte {
	t.Helper()
	ps, err := v.People(context.Background())
	require.NoError(t, err)
	for _, p := range ps {
		if p.Name == user {
			return p.SigningKey
		}
	}
	t.Fatalf("no person %q", user)
	return nil
}

// TestSigningVault: a vault's entries are signed by their authors, the
// first with the creator's key on it; a writer holding the data key
// cannot write in the owner's name, nor grant; a revoked writer's handle
// that keeps writing is caught from the revocation on.
func TestSigningVault(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			setup := func(t *testing.T) (st stores.Store, owner, writer *vault.Vault) {
				st = newStore(t)
				owner = openPerson(t, personCfg(st, "olga", "o"))
				require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "a", Note{Text: "a"}))
				require.NoError(t, owner.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
				require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
				writer = openPerson(t, personCfg(st, "will", "w"))
				require.NoError(t, vault.CollectionOf[Note](writer, "notes").Put(ctx, "b", Note{Text: "b"}))
				return st, owner, writer
			}
			t.Run("honest", func(t *testing.T) {
				_, owner, writer := setup(t)
				es := signedBy(t, owner)
				require.Len(t, es, 4)
				assert.Equal(t, signingKeyOf(t, owner, "olga"), es[0].SigningKey)
				assert.Equal(t, signingKeyOf(t, owner, "will"), es[1].SigningKey, "the grant introduces will's key")
				assert.Equal(t, "will", es[3].Actor)
				verified(t, owner)
				verified(t, writer)
			})
			t.Run("in the owner's name", func(t *testing.T) {
				_, owner, writer := setup(t)
				_, err := vaultLedger(writer).Append(ctx, ledger.Entry{Actor: "olga", Kind: ledger.AppEvent, Reason: "forged"})
				require.NoError(t, err)
				badEntry(t, owner, 5, ledger.BadSignature)
			})
			t.Run("a grant by a writer", func(t *testing.T) {
				_, owner, writer := setup(t)
				_, err := vaultLedger(writer).Append(ctx, ledger.Entry{Kind: ledger.PersonGranted, ID: "mal", Reason: "owner",
					SigningKey: bytes.Repeat([]byte{7}, 32)})
				require.NoError(t, err)
				badEntry(t, owner, 5, ledger.NotPermitted)
			})
			t.Run("revoked", func(t *testing.T) {
				_, owner, writer := setup(t)
				require.NoError(t, owner.Revoke(ctx, "will"))
				// The revocation rotates the keys: its re-sealing appends
				// entries in the background, done before the head is read.
				require.NoError(t, owner.Rotation().Wait(ctx))
				verified(t, owner)
				rep, err := owner.Audit().Verify(ctx)
				require.NoError(t, err)
				// will's handle, opened before, holds only the old keys: its
				// write reads the store's current generation and is refused,
				// nothing appended (a revoked author's forged entry failing
				// Verify is TestSigningForgedWithTheDataKey's).
				err = vault.CollectionOf[Note](writer, "notes").Put(ctx, "c", Note{Text: "late"})
				require.ErrorIs(t, err, vault.ErrNoAccess)
				after, err := owner.Audit().Verify(ctx)
				require.NoError(t, err)
				require.NoError(t, after.Problem)
				require.Equal(t, rep.Head.Seq, after.Head.Seq)
			})
			t.Run("keyring key replaced", func(t *testing.T) {
				st, owner, _ := setup(t)
				// A store that swaps olga's keyring entry for will's (a
				// valid entry of another person) is refused at open, and the
				// ledger, which introduced olga's key, does not take it.
				it, err := st.Get(ctx, "v/team/_keyring/will")
				require.NoError(t, err)
				_, err = st.Put(ctx, "v/team/_keyring/olga", it.Value)
				require.NoError(t, err)
				_, err = vault.Open(ctx, personCfg(st, "olga", "o"))
				require.ErrorIs(t, err, vault.ErrTampered)
				verified(t, owner)
			})
		})
	}
}

// TestSigningReader: a reader's vault writes nothing, its own secret
// change (and the renewal of their signing key it makes) is signed by the
// reader and verifies.
func TestSigningReader(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	reader := openPerson(t, personCfg(st, "rita", "r"))
	_, err := reader.Record(ctx, "login", nil)
	require.ErrorIs(t, err, vault.ErrNotPermitted)
	require.NoError(t, reader.ChangeSecret(ctx, []byte("r"), []byte("r2")))
	es := signedBy(t, owner)
	require.Len(t, es, 3)
	assert.Equal(t, "rita", es[1].Actor)
	assert.Equal(t, ledger.KeysRenewed, es[2].Kind)
	assert.Equal(t, "rita", es[2].Actor)
	verified(t, owner)
	verified(t, reader)
}

// TestSigningSync: on a hub, each device's person signs the entries their
// pushes add to the hub's feed, and the pulls on each device are signed by
// its own person: every ledger verifies, the hub's included.
func TestSigningSync(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "from-a", Note{Text: "a"}))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "from-b", Note{Text: "b"}))
	mustSync(t, b)
	mustSync(t, a)

	actors := map[string]bool{}
	onHub := openPerson(t, personCfg(hub, "olga", "o"))
	for _, e := range signedBy(t, onHub) {
		actors[e.Actor] = true
	}
	assert.Equal(t, map[string]bool{"olga": true, "bob": true}, actors, "the hub's feed has entries of both")
	verified(t, onHub)
	signedBy(t, a)
	verified(t, a)
	signedBy(t, b)
	verified(t, b)
}
