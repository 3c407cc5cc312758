package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// hubPerson is personCfg on a device of hub.
func hubPerson(device, hub stores.Store, user, secret string) vault.Config {
	cfg := personCfg(device, user, secret)
	cfg.Hub = hub
	return cfg
}

// TestPeopleThroughHub: a grant, a secret change and a revocation made on
// one device reach the others through the hub with Sync.
func TestPeopleThroughHub(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b1")), vault.RoleWriter))
	mustSync(t, a)

	b, err := vault.Open(ctx, hubPerson(devB, hub, "bob", "b1"))
	require.NoError(t, err)
	assert.Equal(t, vault.RoleWriter, b.Role())
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "from-b", Note{Text: "hi"}))
	require.NoError(t, b.ChangeSecret(ctx, []byte("b1"), []byte("b2")))
	mustSync(t, b)
	require.NoError(t, b.Close())

	// On device A, bob's new secret opens and the old one no longer does.
	_, err = vault.Open(ctx, hubPerson(devA, hub, "bob", "b1"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	ba := openPerson(t, hubPerson(devA, hub, "bob", "b2"))
	assert.Equal(t, vault.RoleWriter, ba.Role())

	require.NoError(t, a.Revoke(ctx, "bob"))
	mustSync(t, a)
	_, err = vault.Open(ctx, hubPerson(devB, hub, "bob", "b2"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)

	verified(t, a)
	assert.Equal(t, []string{"person-granted olga bob", "person-revoked olga bob"}, peopleKinds(t, a))
	// Bob's secret change is in the ledger of device B, where he made it.
	bcfg := hubPerson(devB, hub, "olga", "o")
	bcfg.Hub = nil
	onB := openPerson(t, bcfg)
	verified(t, onB)
	assert.Equal(t, []string{"secret-changed bob bob"}, peopleKinds(t, onB))
}
