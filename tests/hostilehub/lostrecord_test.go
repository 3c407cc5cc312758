package hostilehub_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// TestHubLosesAPushedRecord: the hub keeps the feed entry of a record a
// device pushed and deletes the record. The device that pushed it, when
// it next pushes a change of that record, and every other device, at its
// next pull, get ErrHubTampered: none of them syncs on as if nothing
// happened, and the device's change stays on the device, unpushed.
func TestHubLosesAPushedRecord(t *testing.T) {
	eachSetup(t, func(t *testing.T, s setup) {
		ctx, hub := context.Background(), s.hub
		a := openDevice(t, s.newDevice(t), hub.Store(), deviceOpts{})
		b := openDevice(t, s.newDevice(t), hub.Store(), deviceOpts{})
		na := vault.CollectionOf[Note](a, "notes")
		require.NoError(t, na.Put(ctx, "x", Note{"xylophone"}))
		require.NoError(t, na.Put(ctx, "y", Note{"yak"}))
		mustSync(t, a)

		require.NoError(t, hub.Drop(ctx, "v/shop/notes/x"))

		require.NoError(t, na.Put(ctx, "x", Note{"xenon"}))
		for range 2 { // every sync says so, not only the first
			rep, err := a.Sync(ctx)
			require.ErrorIs(t, err, vault.ErrHubTampered, "report: %+v", rep)
		}
		_, err := hub.Raw().Get(ctx, "v/shop/notes/x")
		assert.ErrorIs(t, err, stores.ErrNotFound, "the change was not pushed over the hole")
		assert.Equal(t, map[string]string{"x": "xenon@2", "y": "yak@1"}, notes(t, a))

		_, err = b.Sync(ctx)
		require.ErrorIs(t, err, vault.ErrHubTampered)
	})
}
