package hostilehub_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// TestHubReplaysAnotherVaultsValues: a hub holds two vaults of one name
// (two hubs here, as two tenants of one server would be), and serves one
// vault's values under the other's keys: a record, feed entries, a
// counter, a keyring entry. Each is sealed with the other vault's keys, so
// nothing of it is applied or trusted: the sync fails with
// ErrHubTampered, the number with ErrTampered, and a new device does not
// open (a device holding the vault keeps its own entry); no number is
// given twice.
func TestHubReplaysAnotherVaultsValues(t *testing.T) {
	// replay sets up a fresh hub of s's kind and the other, and returns
	// the first with two devices of its vault.
	replay := func(t *testing.T, s setup, prefix string) (hub *faultstore.Adversary, a1, b1 *vault.Vault) {
		ctx := context.Background()
		hub, other := s.newHub(t), s.newHub(t)
		a1 = openDevice(t, s.newDevice(t), hub.Store(), deviceOpts{})
		b1 = openDevice(t, s.newDevice(t), hub.Store(), deviceOpts{})
		// The other vault: created apart (so other keys), by a person of
		// the same name.
		a2, err := vault.Open(ctx, vault.Config{Store: s.newDevice(t), Hub: other.Store(), Name: "shop",
			User: "alice", Secret: []byte("other secret"), KDF: cheapKDF, InsecureAllowWeakKDF: true})
		require.NoError(t, err)
		t.Cleanup(func() { _ = a2.Close() })
		for i, v := range []*vault.Vault{a1, a2} {
			require.NoError(t, vault.CollectionOf[Note](v, "notes").Put(ctx, "x", Note{"first"}))
			require.NoError(t, vault.CollectionOf[Note](v, "notes").Put(ctx, "x", Note{"second"}))
			take(t, v, "orders", 2+3*i)
			mustSync(t, v)
		}
		replayPrefix(t, other, hub, prefix)
		return hub, a1, b1
	}
	eachSetup(t, func(t *testing.T, s setup) {
		ctx := context.Background()
		t.Run("a record", func(t *testing.T) {
			_, _, b1 := replay(t, s, "v/shop/notes/")
			_, err := b1.Sync(ctx)
			assert.ErrorIs(t, err, vault.ErrHubTampered)
			assert.Empty(t, notes(t, b1))
		})
		t.Run("feed entries", func(t *testing.T) {
			_, _, b1 := replay(t, s, "v/shop/_ledger/")
			_, err := b1.Sync(ctx)
			assert.ErrorIs(t, err, vault.ErrHubTampered)
			assert.Empty(t, notes(t, b1))
		})
		t.Run("a counter", func(t *testing.T) {
			_, a1, b1 := replay(t, s, "v/shop/_sequences/")
			for _, v := range []*vault.Vault{a1, b1} {
				q, err := v.Sequence("orders", sequence.Options{})
				require.NoError(t, err)
				_, err = q.Next(ctx)
				assert.ErrorIs(t, err, vault.ErrTampered)
			}
		})
		t.Run("a keyring entry", func(t *testing.T) {
			hub, a1, _ := replay(t, s, "v/shop/_keyring/")
			_, err := openDeviceErr(s.newDevice(t), hub.Store(), deviceOpts{})
			assert.Error(t, err, "a new device")
			assert.True(t, errorsAny(err, vault.ErrTampered, vault.ErrHubMismatch, vault.ErrNoAccess, vault.ErrWrongSecret), "%v", err)
			// A device that holds the vault keeps its own entry: it is not
			// locked out, and syncs on.
			mustSync(t, a1)
			assert.Equal(t, map[string]string{"x": "second@2"}, notes(t, a1))
		})
	})
}

// replayPrefix copies the values src holds under prefix to dst at the
// same keys, over dst's own.
func replayPrefix(t testing.TB, src, dst *faultstore.Adversary, prefix string) {
	t.Helper()
	ctx := context.Background()
	n := 0
	for it, err := range src.Raw().List(ctx, prefix) {
		require.NoError(t, err)
		if strings.HasSuffix(it.Key, "/head") && prefix != "v/shop/_ledger/" {
			continue
		}
		require.NoError(t, dst.Set(ctx, it.Key, it.Value))
		n++
	}
	require.NotZero(t, n, "nothing under %s", prefix)
}

// errorsAny reports whether err matches one of targets.
func errorsAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
