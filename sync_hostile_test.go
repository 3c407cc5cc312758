package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// hostileSetup: devices A and B synced through a memstore hub, holding
// notes x and y at revision 1.
func hostileSetup(t *testing.T) (hub *memstore.Store, da, db stores.Store, a, b *vault.Vault) {
	t.Helper()
	ctx := context.Background()
	hub, da, db = memstore.New(), memstore.New(), memstore.New()
	a, b = syncDevice(t, da, hub), syncDevice(t, db, hub)
	na := vault.CollectionOf[Note](a, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"xylophone"}))
	require.NoError(t, na.Put(ctx, "y", Note{"yak"}))
	mustSync(t, a)
	mustSync(t, b)
	return hub, da, db, a, b
}

// rewindStore makes st hold exactly snap.
func rewindStore(t *testing.T, st stores.Store, snap map[string]string) {
	t.Helper()
	ctx := context.Background()
	for k := range snapshot(t, st) {
		if _, ok := snap[k]; !ok {
			require.NoError(t, st.Delete(ctx, k))
		}
	}
	for k, v := range snap {
		_, err := st.Put(ctx, k, []byte(v))
		require.NoError(t, err)
	}
}

// TestSyncHostileHub: what a hub that changes its store behind the
// devices' back achieves, case by case.
func TestSyncHostileHub(t *testing.T) {
	ctx := context.Background()
	const x, y = "v/shop/notes/x", "v/shop/notes/y"

	t.Run("a record injected without a feed entry is never read", func(t *testing.T) {
		hub, _, _, a, b := hostileSetup(t)
		it, err := hub.Get(ctx, x)
		require.NoError(t, err)
		_, err = hub.Put(ctx, "v/shop/notes/evil", it.Value) // x's bytes at another id
		require.NoError(t, err)
		assert.Equal(t, vault.SyncReport{}, mustSync(t, b))
		assert.Equal(t, map[string]string{"x": "xylophone@1", "y": "yak@1"}, notes(t, b))
		assert.Equal(t, notes(t, a), notes(t, b))
	})

	t.Run("an older revision replayed under a newer entry", func(t *testing.T) {
		hub, _, _, a, b := hostileSetup(t)
		old, err := hub.Get(ctx, x)
		require.NoError(t, err)
		na := vault.CollectionOf[Note](a, "notes")
		require.NoError(t, na.Put(ctx, "y", Note{"yeti"}))
		require.NoError(t, na.Put(ctx, "x", Note{"xenon"}))
		mustSync(t, a)
		_, err = hub.Put(ctx, x, old.Value)
		require.NoError(t, err)
		_, err = b.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrHubTampered)
		// Nothing of the batch applied: y's change came with x's.
		assert.Equal(t, map[string]string{"x": "xylophone@1", "y": "yak@1"}, notes(t, b))
	})

	t.Run("a record moved to another id under its entry", func(t *testing.T) {
		hub, _, _, a, b := hostileSetup(t)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"xenon"}))
		mustSync(t, a)
		it, err := hub.Get(ctx, y)
		require.NoError(t, err)
		_, err = hub.Put(ctx, x, it.Value)
		require.NoError(t, err)
		_, err = b.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrHubTampered)
		assert.Equal(t, map[string]string{"x": "xylophone@1", "y": "yak@1"}, notes(t, b))
	})

	t.Run("feed entries reordered", func(t *testing.T) {
		hub, _, _, a, b := hostileSetup(t)
		na := vault.CollectionOf[Note](a, "notes")
		require.NoError(t, na.Put(ctx, "x", Note{"xenon"}))
		require.NoError(t, na.Put(ctx, "y", Note{"yeti"}))
		mustSync(t, a)
		e3, e4 := "v/shop/_ledger/00000000000000000003", "v/shop/_ledger/00000000000000000004"
		i3, err := hub.Get(ctx, e3)
		require.NoError(t, err)
		i4, err := hub.Get(ctx, e4)
		require.NoError(t, err)
		_, err = hub.Put(ctx, e3, i4.Value)
		require.NoError(t, err)
		_, err = hub.Put(ctx, e4, i3.Value)
		require.NoError(t, err)
		_, err = b.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrHubTampered)
		assert.Equal(t, map[string]string{"x": "xylophone@1", "y": "yak@1"}, notes(t, b))
	})

	t.Run("a feed entry dropped", func(t *testing.T) {
		hub, _, _, a, b := hostileSetup(t)
		na := vault.CollectionOf[Note](a, "notes")
		require.NoError(t, na.Put(ctx, "x", Note{"xenon"}))
		require.NoError(t, na.Put(ctx, "y", Note{"yeti"}))
		mustSync(t, a)
		require.NoError(t, hub.Delete(ctx, "v/shop/_ledger/00000000000000000003"))
		_, err := b.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrHubTampered)
		assert.Equal(t, map[string]string{"x": "xylophone@1", "y": "yak@1"}, notes(t, b))
	})

	t.Run("the hub rolled back to an earlier snapshot", func(t *testing.T) {
		hub, _, db, a, b := hostileSetup(t)
		snap := snapshot(t, hub)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"xenon"}))
		mustSync(t, a)
		mustSync(t, b)
		rewindStore(t, hub, snap)
		_, err := b.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrRollback)
		// A device opened afresh (no memory of the hub but its store's
		// cursor) catches it as well.
		b2 := syncDevice(t, db, hub)
		_, err = b2.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrRollback)
		assert.Equal(t, map[string]string{"x": "xenon@2", "y": "yak@1"}, notes(t, b2))
	})

	t.Run("the hub rolled back, then forked to the same length", func(t *testing.T) {
		hub, _, db, a, b := hostileSetup(t)
		snap := snapshot(t, hub)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"xenon"}))
		mustSync(t, a)
		mustSync(t, b)
		rewindStore(t, hub, snap)
		// A third device (fresh, so it sees the old hub as the truth) writes
		// an entry at the position B has applied.
		c := syncDevice(t, memstore.New(), hub)
		require.NoError(t, vault.CollectionOf[Note](c, "notes").Put(ctx, "z", Note{"zebra"}))
		require.Equal(t, 1, mustSync(t, c).Pushed)
		b2 := syncDevice(t, db, hub)
		_, err := b2.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrHubTampered)
		_ = b
	})
}

// TestSyncHubHoldsNoPlaintext: after devices synced records, no key or
// value of the hub's store contains any of their texts.
func TestSyncHubHoldsNoPlaintext(t *testing.T) {
	ctx := context.Background()
	hub, da, db := memstore.New(), memstore.New(), memstore.New()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	texts := []string{"marmalade-7731", "quince-jelly-9120", "tamarind-4407"}
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n1", Note{texts[0]}))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "n2", Note{texts[1]}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n1", Note{texts[2]}))
	mustSync(t, a)
	mustSync(t, b)
	assertConverged(t, hub, []stores.Store{da, db}, a, b)
	snap := snapshot(t, hub)
	require.NotEmpty(t, snap)
	for k, v := range snap {
		for _, s := range texts {
			assert.NotContains(t, k, s)
			assert.False(t, strings.Contains(v, s), "plaintext %q in the hub's value at %s", s, k)
		}
	}
}

// TestSyncHubRollbackPinnedInStateDir: the hub's feed head is pinned in the
// device's state folder, so a hub rolled back is caught after a restart
// even when the device's own sync cursor is gone.
func TestSyncHubRollbackPinnedInStateDir(t *testing.T) {
	ctx := context.Background()
	hub, da, db := memstore.New(), memstore.New(), memstore.New()
	dir := t.TempDir()
	openB := func() (*noydb.DB, *vault.Vault) {
		d, err := noydb.Open(ctx, noydb.Config{
			User: "alice", Secret: []byte("s3cret"), Store: db, Hub: hub, StateDir: dir,
			KDF: cheapKDF, InsecureAllowWeakKDF: true,
		})
		require.NoError(t, err)
		v, err := d.OpenVault(ctx, "shop")
		require.NoError(t, err)
		return d, v
	}
	a := syncDevice(t, da, hub)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"xylophone"}))
	mustSync(t, a)
	snap := snapshot(t, hub)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"xenon"}))
	mustSync(t, a)

	dbB, b := openB()
	mustSync(t, b)
	require.NoError(t, dbB.Close())

	rewindStore(t, hub, snap)
	require.NoError(t, db.Delete(ctx, "v/shop/_sync/pull"))
	dbB, b = openB()
	defer dbB.Close()
	_, err := b.Sync(ctx)
	assert.ErrorIs(t, err, vault.ErrRollback)
}
