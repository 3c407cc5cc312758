package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// largestNoteText returns the length of the longest Note text a vault
// accepts (its sealed record at the store's value limit), found by
// writing notes of each length tried.
func largestNoteText(t testing.TB) int {
	t.Helper()
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "shop")
	c := vault.CollectionOf[Note](v, "notes")
	lo, hi := 1, stores.MaxValueLen // c.Put accepts lo; hi is too long
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if err := c.Put(ctx, "probe", Note{strings.Repeat("m", mid)}); err != nil {
			require.ErrorIs(t, err, stores.ErrTooLarge)
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

// TestSyncKeptConflictAtTheSizeLimit: a Manual conflict on a record as
// large as a store takes is kept, both sides read back whole, and the
// device's syncs go on: a later change of another record arrives, and the
// conflict resolves and reaches the hub. Before the fix the hub's sealed
// side was sealed again inside the kept conflict, which no store took: the
// device's every Sync failed with stores.ErrTooLarge, for good.
func TestSyncKeptConflictAtTheSizeLimit(t *testing.T) {
	n := largestNoteText(t)
	for devName, newDev := range memAndBadger() {
		t.Run(devName+"-devices/memhub", func(t *testing.T) {
			keptConflictAtLimit(t, n, memstore.New(), newDev(t), newDev(t))
		})
	}
}

// TestSyncKeptConflictAtTheSizeLimitPG is the same with a PostgreSQL hub
// (scripts/with-postgres).
func TestSyncKeptConflictAtTheSizeLimitPG(t *testing.T) {
	n := largestNoteText(t)
	keptConflictAtLimit(t, n, pgtest.Open(t, nil), memstore.New(), memstore.New())
}

func keptConflictAtLimit(t *testing.T, n int, hub, da, db stores.Store) {
	ctx := context.Background()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	require.NoError(t, b.SetConflictPolicy("notes", vault.Manual))
	na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"base"}))
	mustSync(t, a)
	mustSync(t, b)
	bigA, bigB := strings.Repeat("a", n), strings.Repeat("b", n)
	require.NoError(t, na.Put(ctx, "x", Note{bigA}))
	require.NoError(t, nb.Put(ctx, "x", Note{bigB}))
	mustSync(t, a)

	rep, err := b.Sync(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Conflicts, 1)
	assert.True(t, rep.Conflicts[0].Kept)
	dev, hubSide, err := nb.ConflictSides(ctx, "x")
	require.NoError(t, err)
	require.NotNil(t, dev)
	require.NotNil(t, hubSide)
	assert.True(t, dev.Value.Text == bigB, "the device's side")
	assert.True(t, hubSide.Value.Text == bigA, "the hub's side, whole")

	require.NoError(t, na.Put(ctx, "y", Note{"yak"}))
	mustSync(t, a)
	mustSync(t, b)
	got, err := nb.Get(ctx, "y")
	require.NoError(t, err, "a later change arrives")
	assert.Equal(t, "yak", got.Text)

	require.NoError(t, nb.Resolve(ctx, "x", &Note{bigA[:n-1] + "!"}))
	assert.Equal(t, 1, mustSync(t, b).Pushed)
	mustSync(t, a)
	got, err = na.Get(ctx, "x")
	require.NoError(t, err)
	assert.True(t, got.Text == bigA[:n-1]+"!", "the resolution reached the other device")
}

// The hub's side of a kept conflict is kept where a policy keeps the side
// it made lose, one value, checked when read: a store that swaps it for
// another revision of the record, or deletes it, is ErrTampered at
// ConflictSides and Resolve, and nothing is resolved; once the conflict is
// resolved its side is gone.
func TestSyncKeptSideIsCheckedAndDroppedWithItsConflict(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	adv := faultstore.NewAdversary(memstore.New())
	a, b := syncDevice(t, memstore.New(), hub), syncDevice(t, adv, hub)
	require.NoError(t, b.SetConflictPolicy("notes", vault.Manual))
	na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
	require.NoError(t, na.Put(ctx, "x", Note{"base"}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, na.Put(ctx, "x", Note{"A"}))
	require.NoError(t, nb.Put(ctx, "x", Note{"B"}))
	mustSync(t, a)
	rep := mustSync(t, b)
	require.Len(t, rep.Conflicts, 1)
	require.True(t, rep.Conflicts[0].Kept)

	const sides = "v/shop/_sync/lost/notes/x"
	keys, err := adv.Keys(ctx, sides)
	require.NoError(t, err)
	require.Len(t, keys, 1, "the hub's side, kept once")
	// The hub changes the record again: the conflict kept anew, with the
	// hub's new side only.
	require.NoError(t, na.Put(ctx, "x", Note{"A2"}))
	mustSync(t, a)
	rep = mustSync(t, b)
	require.Len(t, rep.Conflicts, 1)
	require.True(t, rep.Conflicts[0].Kept)
	again, err := adv.Keys(ctx, sides)
	require.NoError(t, err)
	require.Len(t, again, 1, "the side of the superseded conflict is dropped")
	assert.NotEqual(t, keys[0], again[0])
	keys = again
	kept, err := adv.Raw().Get(ctx, keys[0])
	require.NoError(t, err)

	// The device's own revision of the record, genuine, put there.
	cur, err := adv.Raw().Get(ctx, "v/shop/notes/x")
	require.NoError(t, err)
	require.NoError(t, adv.Set(ctx, keys[0], cur.Value))
	_, _, err = nb.ConflictSides(ctx, "x")
	require.ErrorIs(t, err, vault.ErrTampered)
	require.ErrorIs(t, nb.Resolve(ctx, "x", &Note{"C"}), vault.ErrTampered)

	require.NoError(t, adv.Drop(ctx, keys[0]))
	_, _, err = nb.ConflictSides(ctx, "x")
	require.ErrorIs(t, err, vault.ErrTampered)

	require.NoError(t, adv.Set(ctx, keys[0], kept.Value))
	_, hubSide, err := nb.ConflictSides(ctx, "x")
	require.NoError(t, err)
	require.NotNil(t, hubSide)
	assert.Equal(t, "A2", hubSide.Value.Text)
	got, err := nb.Get(ctx, "x")
	require.NoError(t, err)
	assert.Equal(t, "B", got.Text, "nothing resolved by the refused Resolve")

	require.NoError(t, nb.Resolve(ctx, "x", &Note{"C"}))
	keys, err = adv.Keys(ctx, sides)
	require.NoError(t, err)
	assert.Empty(t, keys, "a resolved conflict keeps no side")
	assert.Equal(t, 1, mustSync(t, b).Pushed)
}
