package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// TestPeopleV1WritesAfterUpgrade: in a vault of layout version 1, once
// olga upgrades her keyring entry the ledger is signed, and an unsigned
// entry after a signed one fails Verify for good. A handle without a
// signing key (otto's, opened before or after the upgrade, and olga's
// own other handle opened before it) used to write such entries: the
// honest vault then failed Verify. Each is now refused with
// ErrNotPermitted (a record, a number), writing nothing; otto upgrades
// his own entry and writes, olga's old handle opened again writes, and
// the ledger verifies throughout.
func TestPeopleV1WritesAfterUpgrade(t *testing.T) {
	ctx := context.Background()
	kinds := memAndBadger()
	kinds["filestore"] = func(t testing.TB) stores.Store {
		st, err := filestore.Open(t.TempDir(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	for name, newStore := range kinds {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			writeV1Vault(t, st, map[string]string{"olga": "o-secret", "otto": "t-secret"})
			oldOtto := openPerson(t, personCfg(st, "otto", "t-secret"))
			oldOlga := openPerson(t, personCfg(st, "olga", "o-secret"))
			require.NoError(t, vault.CollectionOf[Note](oldOtto, "notes").Put(ctx, "n0", Note{Text: "before"}),
				"before any upgrade a version 1 handle writes")
			v := openPerson(t, personCfg(st, "olga", "o-secret"))
			require.NoError(t, v.UpgradeKeyring(ctx, []byte("o-secret")))
			newOtto := openPerson(t, personCfg(st, "otto", "t-secret"))

			before := faultstore.Snapshot(snapshotStore(t, st))
			for who, h := range map[string]*vault.Vault{"otto opened before": oldOtto, "otto opened after": newOtto, "olga's other handle": oldOlga} {
				err := vault.CollectionOf[Note](h, "notes").Put(ctx, "n1", Note{Text: "x"})
				assert.ErrorIs(t, err, vault.ErrNotPermitted, "%s: put", who)
				if name != "filestore" { // numbers need compare-and-swap
					s, err := h.Sequence("inv", sequence.Options{})
					require.NoError(t, err)
					_, err = s.Next(ctx)
					assert.ErrorIs(t, err, vault.ErrNotPermitted, "%s: next", who)
				}
			}
			assert.Empty(t, changedKeys(before, faultstore.Snapshot(snapshotStore(t, st))), "refused writes wrote nothing")
			verified(t, v)

			require.NoError(t, oldOtto.UpgradeKeyring(ctx, []byte("t-secret")))
			require.NoError(t, vault.CollectionOf[Note](oldOtto, "notes").Put(ctx, "n2", Note{Text: "otto"}))
			again := openPerson(t, personCfg(st, "olga", "o-secret"))
			require.NoError(t, vault.CollectionOf[Note](again, "notes").Put(ctx, "n3", Note{Text: "olga"}))
			verified(t, v)
		})
	}
}

// TestPeopleV1EmptyVaultUpgrades: a vault of layout version 1 with no
// ledger entry yet, whose owners upgrade one after the other. The first
// upgrade is entry 1, so the ledger began signed, and Verify took the
// second owner's upgrade for an unknown signer: the honest vault failed
// Verify. A ledger whose first entry is a self-upgrade now counts as one
// that began in layout version 1.
func TestPeopleV1EmptyVaultUpgrades(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			writeV1Vault(t, st, map[string]string{"olga": "o-secret", "otto": "t-secret"})
			a := openPerson(t, personCfg(st, "olga", "o-secret"))
			b := openPerson(t, personCfg(st, "otto", "t-secret"))
			require.NoError(t, a.UpgradeKeyring(ctx, []byte("o-secret")))
			require.NoError(t, b.UpgradeKeyring(ctx, []byte("t-secret")))
			verified(t, a)
			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "n1", Note{Text: "otto"}))
			require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n2", Note{Text: "olga"}))
			verified(t, a)
			again := openPerson(t, personCfg(st, "otto", "t-secret"))
			assert.Equal(t, vault.RoleOwner, again.Role())
			verified(t, again)
			assert.Equal(t, []string{"keyring-upgraded olga olga", "keyring-upgraded otto otto"}, peopleKinds(t, again))
		})
	}
}
