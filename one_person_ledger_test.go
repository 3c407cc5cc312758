package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// vouchedBy says, per entry of v's ledger from position from, how it is
// vouched for: 'c' Chained, 'v' Covered, 's' signed, '-' unsigned.
func vouchedBy(t *testing.T, v *vault.Vault, from uint64) string {
	t.Helper()
	var b []byte
	for e, err := range v.Audit().Read(context.Background(), from) {
		require.NoError(t, err)
		switch {
		case e.Chained:
			b = append(b, 'c')
		case e.Covered:
			b = append(b, 'v')
		case len(e.Signature) > 0:
			b = append(b, 's')
		default:
			b = append(b, '-')
		}
	}
	return string(b)
}

// takeNumbers takes n numbers of series s in v.
func takeNumbers(t *testing.T, v *vault.Vault, s string, n int) {
	t.Helper()
	seq, err := v.Sequence(s, sequence.Options{})
	require.NoError(t, err)
	for range n {
		_, err := seq.Next(context.Background())
		require.NoError(t, err)
	}
}

// TestOnePersonVaultChainsItsLedger: a vault only its creator has held
// writes its ledger Chained, without a signature per commit; the grant of
// a second person is signed, and so is every entry after it, the new
// person's and the creator's; Verify accepts the ledger on memstore and
// badger, reopened too.
func TestOnePersonVaultChainsItsLedger(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			takeNumbers(t, owner, "inv", 3)
			require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "a", Note{Text: "a"}))
			alone := vouchedBy(t, owner, 1)
			assert.Regexp(t, "^c+$", alone)
			verified(t, owner)

			require.NoError(t, owner.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
			takeNumbers(t, owner, "inv", 2)
			writer := openPerson(t, personCfg(st, "will", "w"))
			takeNumbers(t, writer, "inv", 2)
			shared := vouchedBy(t, owner, uint64(len(alone))+1)
			assert.Regexp(t, "^[vs]*s$", shared)
			assert.NotContains(t, shared, "c")
			verified(t, owner)
			verified(t, writer)
			require.NoError(t, owner.Close())

			again := openPerson(t, personCfg(st, "olga", "o"))
			takeNumbers(t, again, "inv", 1)
			assert.Equal(t, "s", vouchedBy(t, again, uint64(len(alone)+len(shared))+1))
			verified(t, again)
		})
	}
}

// TestOnePersonVaultRevokedThenAlone: a vault whose second person was
// revoked is not a one-person vault again: the revoked person still
// knows the chain key, so every entry stays signed.
func TestOnePersonVaultRevokedThenAlone(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	takeNumbers(t, owner, "inv", 1)
	require.NoError(t, owner.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	require.NoError(t, owner.Revoke(ctx, "will"))
	require.NoError(t, owner.Close())
	again := openPerson(t, personCfg(st, "olga", "o"))
	takeNumbers(t, again, "inv", 2)
	got := vouchedBy(t, again, 2)
	assert.NotContains(t, got, "c")
	verified(t, again)
}

// TestOnePersonVaultLearnsGrantOnAnotherDevice: the creator's device
// writes Chained entries; the creator grants a second person on another
// device of theirs; once the first device syncs and so learns of that
// person, its next commit is signed and every later one, though its own
// ledger records no grant, and its ledger verifies.
func TestOnePersonVaultLearnsGrantOnAnotherDevice(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	notes := vault.CollectionOf[Note](a, "notes")
	for _, id := range []string{"a1", "a2"} {
		require.NoError(t, notes.Put(ctx, id, Note{Text: id}))
	}
	assert.Regexp(t, "^c+$", vouchedBy(t, a, 1))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	require.NoError(t, b.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, b)

	before, err := a.Audit().Head(ctx)
	require.NoError(t, err)
	mustSync(t, a)
	for _, id := range []string{"a3", "a4"} {
		require.NoError(t, notes.Put(ctx, id, Note{Text: id}))
	}
	got := vouchedBy(t, a, before.Seq+1)
	assert.NotContains(t, got, "c", "signed from the sync on: %s", got)
	assert.Regexp(t, "s$", got)
	verified(t, a)
	verified(t, b)
}

// TestOnePersonVaultSignsAfterARenewal: the creator's own recovery codes,
// issued, leave a one-person vault so (its entries stay Chained); using
// one renews the creator's keys, whose KeysRenewed entry closes the window
// (whoever held the old secret or code holds the chain key too): every
// later commit is signed, and the vault verifies.
func TestOnePersonVaultSignsAfterARenewal(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	takeNumbers(t, owner, "inv", 1)
	codes, err := owner.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, owner.Close())
	recovered := openPerson(t, recoverCfg(st, "olga", codes[0], "o2"))
	takeNumbers(t, recovered, "inv", 1)
	assert.Regexp(t, "^c+ss$", vouchedBy(t, recovered, 1), "chained up to the renewal, signed from it on")
	verified(t, recovered)
}
