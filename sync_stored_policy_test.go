package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// A policy stored with a collection decides every later sync of every
// device that sets none, and the side it made lose stays readable. Before,
// a policy lived only as long as the handle that set it: the next plain
// sync decided by higher revision and the device's edit was gone.
func TestStoredPolicyDecidesAndTheLoserStaysReadable(t *testing.T) {
	ctx := context.Background()
	for storeName, newStore := range memAndBadger() {
		t.Run(storeName, func(t *testing.T) {
			hub := memstore.New()
			da, db := newStore(t), newStore(t)
			a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
			na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
			require.NoError(t, na.Put(ctx, "x", Note{"base"}))
			mustSync(t, a)
			mustSync(t, b)

			// A stores hub-wins; B sets nothing. B's edit (the higher
			// revision) loses to the hub's by the stored policy.
			require.NoError(t, a.StoreConflictPolicy(ctx, "notes", vault.HubWins))
			require.NoError(t, a.StoreConflictPolicy(ctx, "notes", vault.HubWins), "again: nothing to do")
			require.NoError(t, na.Put(ctx, "x", Note{"A"}))
			require.NoError(t, nb.Put(ctx, "x", Note{"B-draft"}))
			require.NoError(t, nb.Put(ctx, "x", Note{"B"}))
			mustSync(t, a)
			rb := mustSync(t, b)
			require.Len(t, rb.Conflicts, 1)
			assert.Equal(t, vault.HubWins, rb.Conflicts[0].Policy)
			assert.True(t, rb.Conflicts[0].HubWon)
			got, err := nb.Get(ctx, "x")
			require.NoError(t, err)
			assert.Equal(t, Note{"A"}, got)

			stored, err := a.StoredConflictPolicies(ctx)
			require.NoError(t, err)
			assert.Equal(t, map[string]vault.SyncPolicy{"notes": vault.HubWins}, stored)

			lost, err := b.LostConflicts(ctx)
			require.NoError(t, err)
			require.Len(t, lost, 1)
			assert.Equal(t, "notes", lost[0].Collection)
			assert.Equal(t, "x", lost[0].ID)
			assert.Equal(t, "hub-wins", lost[0].Policy)
			assert.False(t, lost[0].HubLost)
			assert.Equal(t, uint64(3), lost[0].Revision)
			r, err := nb.LostValue(ctx, lost[0])
			require.NoError(t, err)
			assert.Equal(t, Note{"B"}, r.Value)
			assert.Equal(t, uint64(3), r.Revision)

			// A handle's own policy still comes first: B keeps its edit now.
			require.NoError(t, b.SetConflictPolicy("notes", vault.DeviceWins))
			require.NoError(t, na.Put(ctx, "x", Note{"A2"}))
			require.NoError(t, nb.Put(ctx, "x", Note{"B2"}))
			mustSync(t, a)
			rb = mustSync(t, b)
			require.Len(t, rb.Conflicts, 1)
			assert.Equal(t, vault.DeviceWins, rb.Conflicts[0].Policy)
			lost, err = b.LostConflicts(ctx)
			require.NoError(t, err)
			require.Len(t, lost, 2)
			assert.True(t, lost[1].HubLost)
			r, err = nb.LostValue(ctx, lost[1])
			require.NoError(t, err)
			assert.Equal(t, Note{"A2"}, r.Value)
		})
	}
}

// A store that swaps a kept losing value for another revision of the same
// record is caught by the ledger's cipher hash.
func TestLostValueSwappedByTheStoreIsTampered(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	adv := faultstore.NewAdversary(memstore.New())
	a, b := syncDevice(t, memstore.New(), hub), syncDevice(t, adv, hub)
	na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"base"}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, b.SetConflictPolicy("notes", vault.HubWins))
	require.NoError(t, na.Put(ctx, "x", Note{"A"}))
	require.NoError(t, nb.Put(ctx, "x", Note{"B"}))
	mustSync(t, a)
	mustSync(t, b)
	lost, err := b.LostConflicts(ctx)
	require.NoError(t, err)
	require.Len(t, lost, 1)

	// The record's current revision, genuine, put where the lost value is
	// kept.
	keys, err := adv.Keys(ctx, "v/shop/_sync/lost/notes/x")
	require.NoError(t, err)
	require.Len(t, keys, 1)
	cur, err := adv.Raw().Get(ctx, "v/shop/notes/x")
	require.NoError(t, err)
	require.NoError(t, adv.Set(ctx, keys[0], cur.Value))
	_, err = nb.LostValue(ctx, lost[0])
	require.ErrorIs(t, err, vault.ErrTampered)
}
