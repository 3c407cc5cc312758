package noydb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// putXTimes puts x n times (so its revision climbs by n).
func putXTimes(text string, n int) func(*vault.Collection[Note]) error {
	return func(c *vault.Collection[Note]) error {
		for i := 0; i < n; i++ {
			if err := c.Put(context.Background(), "x", Note{text}); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestSyncHeldConflictWonLaterIsPushed: a conflict kept on a device holds
// its side back from the push (the push cursor moves past it). When a
// later hub change is decided for the device without sealing it again
// (its revision already above the hub's), the device's side must still
// reach the hub: else the device and the hub diverge for good.
func TestSyncHeldConflictWonLaterIsPushed(t *testing.T) {
	ctx := context.Background()
	t.Run("merge failed, then the hub deleted", func(t *testing.T) {
		failing := func(b *vault.Vault) {
			require.NoError(t, vault.MergeWith(b, "notes", func(local, hub Note) (Note, error) {
				return Note{}, errors.New("cannot merge")
			}))
		}
		hub, da, db, a, b := conflictSetup(t, putX("A"), putXTimes("B", 3), failing)
		rep := mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		require.True(t, rep.Conflicts[0].Kept)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Delete(ctx, "x"))
		mustSync(t, a)
		// The hub deleted revision 2 (counts as 3); the device holds 4:
		// HigherRevisionWins decides for the device.
		rep = mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		assert.False(t, rep.Conflicts[0].HubWon)
		mustSync(t, b)
		mustSync(t, a)
		assert.Equal(t, map[string]string{"x": "B@5"}, notes(t, b))
		assertConverged(t, hub, []stores.Store{da, db}, a, b)
	})
	t.Run("manual, then the policy changed and the hub moved", func(t *testing.T) {
		manual := func(b *vault.Vault) { require.NoError(t, b.SetConflictPolicy("notes", vault.Manual)) }
		hub, da, db, a, b := conflictSetup(t, putX("A"), putXTimes("B", 4), manual)
		rep := mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		require.True(t, rep.Conflicts[0].Kept)
		require.NoError(t, b.SetConflictPolicy("notes", vault.DeviceWins))
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"A2"}))
		mustSync(t, a)
		rep = mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		assert.False(t, rep.Conflicts[0].HubWon)
		mustSync(t, a)
		got := assertConverged(t, hub, []stores.Store{da, db}, a, b)
		assert.Equal(t, "B", got["x"][:1])
	})
	t.Run("manual deletion, then the policy changed and the hub moved", func(t *testing.T) {
		manual := func(b *vault.Vault) { require.NoError(t, b.SetConflictPolicy("notes", vault.Manual)) }
		hub, da, db, a, b := conflictSetup(t, putX("A"), deleteX, manual)
		rep := mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		require.True(t, rep.Conflicts[0].Kept)
		require.NoError(t, b.SetConflictPolicy("notes", vault.DeviceWins))
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"A2"}))
		mustSync(t, a)
		rep = mustSync(t, b)
		require.Len(t, rep.Conflicts, 1)
		assert.False(t, rep.Conflicts[0].HubWon)
		mustSync(t, a)
		assert.Equal(t, map[string]string{}, assertConverged(t, hub, []stores.Store{da, db}, a, b))
	})
}

// TestSyncMergeThatPanics: a merge function that panics is a merge that
// failed: the conflict is kept (in Rejected), the sync returns, and the
// vault keeps working (a background Syncer must not take the app down).
func TestSyncMergeThatPanics(t *testing.T) {
	ctx := context.Background()
	panicking := func(b *vault.Vault) {
		require.NoError(t, vault.MergeWith(b, "notes", func(local, hub Note) (Note, error) {
			panic("merge bug")
		}))
	}
	_, _, _, _, b := conflictSetup(t, putX("A"), putX("B"), panicking)
	var rep vault.SyncReport
	var err error
	require.NotPanics(t, func() { rep, err = b.Sync(ctx) })
	require.NoError(t, err)
	require.Len(t, rep.Conflicts, 1)
	assert.True(t, rep.Conflicts[0].Kept)
	require.Len(t, rep.Rejected, 1)
	assert.Contains(t, rep.Rejected[0].Reason, "merge bug")
	pending, err := b.Conflicts(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.PendingConflict{{Collection: "notes", ID: "x", HubRevision: 2}}, pending)
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "y", Note{"still writes"}))
}
