package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
