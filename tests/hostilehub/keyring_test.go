package hostilehub_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// openAs opens the vault "shop" as user on device, a device of hub.
func openAs(t testing.TB, device, hub stores.Store, user, secret string) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), vault.Config{
		Store: device, Hub: hub, Name: "shop", User: user, Secret: []byte(secret),
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// TestHubRollsBackTheKeyring: alice revokes bob, and the hub puts its
// keyring back as it was before (bob's entry granted, a genuine older
// value), keeping its ledger, which holds the revocation. What bob's
// device pushes then fails the hub's Verify (ledger.ErrBadSignature, at
// bob's first entry after the revocation) and alice's next pull
// (ErrHubTampered, nothing of it applied); the revocation stays on the
// hub for a new device of bob's.
func TestHubRollsBackTheKeyring(t *testing.T) {
	eachSetup(t, func(t *testing.T, s setup) {
		ctx := context.Background()
		a := openDevice(t, s.newDevice(t), s.hub.Store(), deviceOpts{})
		require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
		mustSync(t, a)
		b := openAs(t, s.newDevice(t), s.hub.Store(), "bob", "b")
		require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b1", Note{"before"}))
		mustSync(t, b)
		snap, err := s.hub.Snapshot(ctx)
		require.NoError(t, err)

		require.NoError(t, a.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
		mustSync(t, a)
		require.NoError(t, s.hub.Restore(ctx, snap, "v/shop/_keyring/"))

		require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b2", Note{"after"}))
		if _, err := b.Sync(ctx); err == nil {
			onHub := openAlone(t, s.hub.Raw())
			defer func() { _ = onHub.Close() }()
			_, err := onHub.Audit().Verify(ctx)
			require.ErrorIs(t, err, ledger.ErrBadSignature)
			var se *ledger.SignatureError
			require.ErrorAs(t, err, &se, "bob's push after the revocation")
			assert.Equal(t, "bob", se.Actor)
			// Alice's pull checks each change's signature and author
			// before applying it: bob's change is refused, none of it
			// applied on her device.
			_, err = a.Sync(ctx)
			require.ErrorIs(t, err, vault.ErrHubTampered)
			require.ErrorAs(t, err, &se, "bob's change, pulled")
			assert.Equal(t, "bob", se.Actor)
			_, err = vault.CollectionOf[Note](a, "notes").Get(ctx, "b2")
			assert.ErrorIs(t, err, vault.ErrNotFound, "nothing of bob's change applied")
		} else {
			assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's sync is refused")
			mustSync(t, a)
		}

		_, err = vault.Open(ctx, vault.Config{Store: s.newDevice(t), Hub: s.hub.Store(), Name: "shop", User: "bob",
			Secret: []byte("b"), KDF: cheapKDF, InsecureAllowWeakKDF: true})
		assert.ErrorIs(t, err, vault.ErrNoAccess, "the revocation is back on the hub")
	})
}
