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

// TestSyncKeepsLosingSidesAcrossAnAmbiguousPush: device A wins a conflict
// by its policy (the hub's side is kept for LostValue), and its push of
// the winner commits on the hub but reports an error. A changes the
// record again: its next pull recognises its own push (no conflict, no
// side set aside) and the side kept stays readable. A later conflict with
// B keeps B's side beside the first: both losing values read back, and
// every device ends with A's last change.
func TestSyncKeepsLosingSidesAcrossAnAmbiguousPush(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			hub := memstore.New()
			flaky, lostReply := ambiguousHub(hub)
			a, b := syncDevice(t, newStore(t), flaky), syncDevice(t, newStore(t), hub)
			require.NoError(t, a.SetConflictPolicy("notes", vault.DeviceWins))
			na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
			require.NoError(t, na.Put(ctx, "x", Note{"base"}))
			mustSync(t, a)
			mustSync(t, b)

			require.NoError(t, nb.Put(ctx, "x", Note{"B1"}))
			mustSync(t, b)
			require.NoError(t, na.Put(ctx, "x", Note{"A1"}))
			onHub := shopNotes(t, hub)
			lostReply.Store(1)
			_, err := a.Sync(ctx)
			require.ErrorIs(t, err, errLostReply)
			require.NotEqual(t, onHub, shopNotes(t, hub), "A's push committed on the hub")
			lost, err := a.LostConflicts(ctx)
			require.NoError(t, err)
			require.Len(t, lost, 1)

			// A changes the record again: its own push coming back is no
			// conflict, and the side kept stays the one kept.
			require.NoError(t, na.Put(ctx, "x", Note{"A2"}))
			assert.Empty(t, mustSync(t, a).Conflicts, "A's own push is no change of another")
			lost, err = a.LostConflicts(ctx)
			require.NoError(t, err)
			require.Len(t, lost, 1)

			mustSync(t, b)
			got, err := nb.Get(ctx, "x")
			require.NoError(t, err)
			require.Equal(t, Note{"A2"}, got)
			require.NoError(t, nb.Put(ctx, "x", Note{"B2"}))
			mustSync(t, b)
			require.NoError(t, na.Put(ctx, "x", Note{"A3"}))
			rep := mustSync(t, a)
			require.Len(t, rep.Conflicts, 1)
			assert.False(t, rep.Conflicts[0].HubWon)

			lost, err = a.LostConflicts(ctx)
			require.NoError(t, err)
			require.Len(t, lost, 2)
			for i, want := range []string{"B1", "B2"} {
				assert.True(t, lost[i].HubLost)
				r, err := na.LostValue(ctx, lost[i])
				require.NoError(t, err, want)
				assert.Equal(t, Note{want}, r.Value)
			}
			mustSync(t, b)
			for dev, v := range map[string]*vault.Vault{"A": a, "B": b} {
				got, err := vault.CollectionOf[Note](v, "notes").Get(ctx, "x")
				require.NoError(t, err)
				assert.Equal(t, Note{"A3"}, got, dev)
			}
			verified(t, a)
			verified(t, b)
		})
	}
}

// shopNotes returns the sealed notes of vault "shop" on st by key.
func shopNotes(t testing.TB, st stores.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for it, err := range stores.ListUnder(context.Background(), st, "v/shop/notes/") {
		require.NoError(t, err)
		out[it.Key] = string(it.Value)
	}
	return out
}
