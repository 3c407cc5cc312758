package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// TestPeopleV1UpgradedOnADeviceVerifiesOnTheHub: a vault of layout
// version 1 is a device of a hub, and its owners write there before and
// after olga upgrades her keyring entry on her device; otto, another
// owner of version 1, upgrades on his after her. The hub's ledger
// verifies, and so do the devices'. Before the fix the upgrade entry
// stayed in the device's ledger, and the hub's Verify said "unknown
// signer" at olga's first signed entry there.
func TestPeopleV1UpgradedOnADeviceVerifiesOnTheHub(t *testing.T) {
	for devName, newDev := range memAndBadger() {
		t.Run(devName+"-devices/memhub", func(t *testing.T) {
			v1UpgradeOnHub(t, memstore.New(), newDev(t), newDev(t))
		})
	}
}

// TestPeopleV1UpgradedOnADeviceVerifiesOnTheHubPG is the same with a
// PostgreSQL hub (scripts/with-postgres).
func TestPeopleV1UpgradedOnADeviceVerifiesOnTheHubPG(t *testing.T) {
	v1UpgradeOnHub(t, pgtest.Open(t, nil), memstore.New(), memstore.New())
}

func v1UpgradeOnHub(t *testing.T, hub, devA, devB stores.Store) {
	ctx := context.Background()
	writeV1Vault(t, devA, map[string]string{"olga": "o-secret", "otto": "t-secret"})
	a := openPerson(t, hubPerson(devA, hub, "olga", "o-secret"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "before", Note{Text: "v1"}))
	q, err := a.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "otto", "t-secret"))
	mustSync(t, b)

	require.NoError(t, a.UpgradeKeyring(ctx, []byte("o-secret")))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "after", Note{Text: "signed"}))
	_, err = q.Next(ctx)
	require.NoError(t, err)
	mustSync(t, a)
	require.NoError(t, a.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter))
	mustSync(t, a)

	mustSync(t, b)
	require.NoError(t, b.UpgradeKeyring(ctx, []byte("t-secret")))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "otto", Note{Text: "signed"}))
	mustSync(t, b)
	mustSync(t, a)

	onHub := openPerson(t, personCfg(hub, "olga", "o-secret"))
	verified(t, onHub)
	assert.Equal(t, []string{"keyring-upgraded olga olga", "person-granted olga wanda", "keyring-upgraded otto otto"},
		peopleKinds(t, onHub))
	verified(t, a)
	verified(t, b)
}

// TestPeopleV1UpgradedBeforeJoiningVerifiesOnTheHub: olga upgraded her
// entry of a version 1 vault before it joined a hub, so the hub's ledger
// begins signed; otto, the other owner of version 1, upgrades on his
// device of the hub later and writes. The hub's ledger verifies.
func TestPeopleV1UpgradedBeforeJoiningVerifiesOnTheHub(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	writeV1Vault(t, devA, map[string]string{"olga": "o-secret", "otto": "t-secret"})
	solo := openPerson(t, personCfg(devA, "olga", "o-secret"))
	require.NoError(t, solo.UpgradeKeyring(ctx, []byte("o-secret")))
	require.NoError(t, solo.Close())
	a := openPerson(t, hubPerson(devA, hub, "olga", "o-secret"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "olga", Note{Text: "signed"}))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "otto", "t-secret"))
	mustSync(t, b)
	require.NoError(t, b.UpgradeKeyring(ctx, []byte("t-secret")))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "otto", Note{Text: "signed"}))
	mustSync(t, b)
	onHub := openPerson(t, personCfg(hub, "olga", "o-secret"))
	verified(t, onHub)
	verified(t, b)
}
