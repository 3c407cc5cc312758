package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// openDevice opens a DB for user on a device store synced through hub.
func openDevice(t testing.TB, device, hub stores.Store, user, secret string) *noydb.DB {
	t.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{
		User: user, Secret: []byte(secret), Store: device, Hub: hub,
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestHubCarriesTheVaultToANewDevice: a vault created on one device reaches
// the hub at open, and a second device that never held it opens it from
// the hub with the same secret; a wrong secret still fails there.
func TestHubCarriesTheVaultToANewDevice(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openVault(t, openDevice(t, devA, hub, "alice", "s3cret"), "shop")
	require.NoError(t, a.Close())

	for _, k := range []string{"v/shop/_header", "v/shop/_keyring/alice"} {
		ha, err := hub.Get(ctx, k)
		require.NoError(t, err, k)
		da, err := devA.Get(ctx, k)
		require.NoError(t, err, k)
		assert.Equal(t, da.Value, ha.Value, k)
	}

	dbWrong := openDevice(t, devB, hub, "alice", "wrong")
	_, err := dbWrong.OpenVault(ctx, "shop")
	assert.ErrorIs(t, err, vault.ErrWrongSecret)

	b := openVault(t, openDevice(t, devB, hub, "alice", "s3cret"), "shop")
	assert.NoError(t, b.Close())
}

// TestHubHoldingAnotherVault: a device vault and a hub vault of the same
// name but different creation refuse to pair, and nothing is copied.
func TestHubHoldingAnotherVault(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	openVault(t, openDevice(t, devA, hub, "alice", "s3cret"), "shop")
	openVault(t, openDB(t, devB, "bob", "other"), "shop") // created alone on B

	db := openDevice(t, devB, hub, "bob", "other")
	_, err := db.OpenVault(ctx, "shop")
	require.ErrorIs(t, err, vault.ErrHubMismatch)
	_, err = hub.Get(ctx, "v/shop/_keyring/bob")
	assert.ErrorIs(t, err, stores.ErrNotFound, "B's key slot must not reach the hub")
	_, err = devB.Get(ctx, "v/shop/_keyring/alice")
	assert.ErrorIs(t, err, stores.ErrNotFound, "A's key slot must not reach B")
}

// TestHubNeedsAtomicCAS: a store without atomic compare-and-swap cannot be
// a hub.
func TestHubNeedsAtomicCAS(t *testing.T) {
	fs, err := filestore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer func() { _ = fs.Close() }()
	db := openDevice(t, memstore.New(), fs, "alice", "s3cret")
	_, err = db.OpenVault(context.Background(), "shop")
	assert.ErrorIs(t, err, stores.ErrNotSupported)
}
