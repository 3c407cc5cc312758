package noydb_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// keyringConflicts wraps st so that the next n compare-and-swaps of a
// keyring entry (armed by the returned counter) lose a race: they report
// stores.ErrConflict and write nothing, as when another writer of the
// device changed the entry between the read and the write.
func keyringConflicts(st stores.Store) (stores.Store, *atomic.Int64) {
	var n atomic.Int64
	return faultstore.New(st, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && strings.Contains(key, "/_keyring/") && n.Add(-1) >= 0 {
			return stores.ErrConflict
		}
		return nil
	}}), &n
}

// TestSyncBringsARotationPastAKeyringRace: olga rotates on device A and
// writes with the new generation; device B's Sync copies her new keyring
// entry from the hub while its store makes that copy lose a race a few
// times. The Sync still brings the entry, and with it the generation: it
// pulls the record sealed with it, where it used to fail with
// ErrHubTampered on an honest hub (the copy gave up at the first lost
// race, and the record named a generation B did not hold).
func TestSyncBringsARotationPastAKeyringRace(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			syncBringsARotationPastAKeyringRace(t, memstore.New(), newStore(t), newStore(t))
		})
	}
}

func syncBringsARotationPastAKeyringRace(t *testing.T, hub, devA, devB stores.Store) {
	ctx := context.Background()
	storeB, races := keyringConflicts(devB)
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	b := openPerson(t, hubPerson(storeB, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "before"}))
	mustSync(t, a)
	mustSync(t, b)

	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-2", Note{Text: "with generation 2"}))
	mustSync(t, a)

	races.Store(3)
	rep, err := b.Sync(ctx)
	require.NoError(t, err, "an honest hub, a busy device store")
	assert.Equal(t, 2, rep.Pulled)
	got := notesOf(t, b)
	assert.Equal(t, "before", got["n-1"].Value.Text)
	assert.Equal(t, "with generation 2", got["n-2"].Value.Text)
	assert.Equal(t, map[uint64]int{2: 2}, generations(t, devB))
	verified(t, b)
}

// TestSyncRotationPostgresHub runs the rotation scenarios of this file
// with a PostgreSQL hub (under scripts/with-postgres).
func TestSyncRotationPostgresHub(t *testing.T) {
	t.Run("a keyring race", func(t *testing.T) {
		syncBringsARotationPastAKeyringRace(t, pgtest.Open(t, nil), memstore.New(), memstore.New())
	})
}
