package noydb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestSyncConvergenceProperty: three devices, random puts, updates and
// deletes on a few overlapping ids, random syncs, some cut at a random
// store operation on the device's or the hub's side; after a final round
// of syncs every device and the hub hold the same records (value and
// revision) and every ledger verifies. Each schedule uses its own seed
// (shown on failure), and its devices' collections take random policies.
func TestSyncConvergenceProperty(t *testing.T) {
	schedules := 200
	if testing.Short() {
		schedules = 40
	}
	newMem := func() stores.Store { return memstore.New() }
	convergenceSchedules(t, schedules, newMem, newMem)
}

// TestSyncConvergenceBadgerDevices: schedules of TestSyncConvergenceProperty
// with badger devices.
func TestSyncConvergenceBadgerDevices(t *testing.T) {
	newBadger := memAndBadger()["badgerstore"]
	convergenceSchedules(t, 20, func() stores.Store { return memstore.New() }, func() stores.Store { return newBadger(t) })
}

// convergenceSchedules runs the schedules of TestSyncConvergenceProperty,
// each with a hub from newHub.
func convergenceSchedules(t *testing.T, schedules int, newHub, newDevice func() stores.Store) {
	ctx := context.Background()
	policies := []vault.SyncPolicy{vault.HigherRevisionWins, vault.DeviceWins, vault.HubWins, vault.LastWriterWins, vault.FirstWriterWins, vault.Merge}
	ids := []string{"p", "q", "r", "s"}
	var conflicts, pulled, pushed, cuts int
	defer func() {
		t.Logf("%d schedules: %d pulled, %d pushed, %d conflicts, %d syncs cut", schedules, pulled, pushed, conflicts, cuts)
	}()
	for seed := range uint64(schedules) {
		rng := rand.New(rand.NewPCG(seed, 13))
		c := &cutter{}
		rawHub := newHub()
		hubCut := faultstore.New(rawHub, faultstore.Options{Before: c.before, After: c.afterWrite})
		devs := make([]stores.Store, 3)
		vs := make([]*vault.Vault, 3)
		for i := range devs {
			raw := newDevice()
			devs[i] = raw
			vs[i] = syncDevice(t, faultstore.New(raw, faultstore.Options{Before: c.before, After: c.afterWrite}), hubCut)
			if p := policies[rng.IntN(len(policies))]; p == vault.Merge {
				require.NoError(t, vault.MergeWith(vs[i], "notes", func(local, hub Note) (Note, error) {
					return Note{min(local.Text, hub.Text)}, nil
				}))
			} else {
				require.NoError(t, vs[i].SetConflictPolicy("notes", p))
			}
		}
		steps := 10 + rng.IntN(20)
		for step := range steps {
			d := rng.IntN(3)
			col := vault.CollectionOf[Note](vs[d], "notes")
			id := ids[rng.IntN(len(ids))]
			switch op := rng.IntN(10); {
			case op < 5:
				require.NoError(t, col.Put(ctx, id, Note{fmt.Sprintf("%d-%d-%d", seed, step, d)}), "seed %d", seed)
			case op < 7:
				if err := col.Delete(ctx, id); err != nil {
					require.ErrorIs(t, err, vault.ErrNotFound, "seed %d", seed)
				}
			default:
				cut := rng.IntN(3) == 0
				if cut {
					c.k, c.after = int64(1+rng.IntN(12)), rng.IntN(2) == 0
					c.ops.Store(0)
					c.armed.Store(true)
				}
				rep, err := vs[d].Sync(ctx)
				c.armed.Store(false)
				if !cut || !c.reached() {
					require.NoError(t, err, "seed %d step %d", seed, step)
				} else {
					cuts++
				}
				pulled, pushed, conflicts = pulled+rep.Pulled, pushed+rep.Pushed, conflicts+len(rep.Conflicts)
			}
		}
		// Two rounds reach every device with every change.
		for range 2 {
			for _, v := range vs {
				rep, err := v.Sync(ctx)
				require.NoError(t, err, "seed %d", seed)
				pulled, pushed, conflicts = pulled+rep.Pulled, pushed+rep.Pushed, conflicts+len(rep.Conflicts)
			}
		}
		if t.Failed() {
			return
		}
		assertConverged(t, rawHub, devs, vs...)
		if t.Failed() {
			t.Fatalf("seed %d did not converge", seed)
		}
		for _, v := range vs {
			require.NoError(t, v.Close())
		}
	}
}
