package noydb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
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
	convergenceSchedules(t, schedules, func() stores.Store { return memstore.New() }, func(int) stores.Store { return memstore.New() })
}

// TestSyncConvergenceBadgerDevices: schedules of TestSyncConvergenceProperty
// with badger devices.
func TestSyncConvergenceBadgerDevices(t *testing.T) {
	newBadger := memAndBadger()["badgerstore"]
	convergenceSchedules(t, 20, func() stores.Store { return memstore.New() }, func(int) stores.Store { return newBadger(t) })
}

// convergenceSchedules runs the schedules of TestSyncConvergenceProperty,
// each with a hub from newHub and device i's store from newDevice(i).
func convergenceSchedules(t *testing.T, schedules int, newHub func() stores.Store, newDevice func(i int) stores.Store) {
	ctx := context.Background()
	policies := []vault.SyncPolicy{vault.HigherRevisionWins, vault.DeviceWins, vault.HubWins, vault.LastWriterWins, vault.FirstWriterWins, vault.Merge}
	ids := []string{"p", "q", "r", "s"}
	var conflicts, pulled, pushed, cuts, numbered int
	defer func() {
		t.Logf("%d schedules: %d pulled, %d pushed, %d conflicts, %d syncs cut, %d receipts numbered", schedules, pulled, pushed, conflicts, cuts, numbered)
	}()
	for seed := range uint64(schedules) {
		rng := rand.New(rand.NewPCG(seed, 13))
		c := &cutter{}
		rawHub := newHub()
		hubCut := faultstore.New(rawHub, faultstore.Options{Before: c.before, After: c.afterWrite})
		devs := make([]stores.Store, 3)
		vs := make([]*vault.Vault, 3)
		rs := make([]*vault.Numbered[Receipt], 3)
		for i := range devs {
			raw := newDevice(i)
			devs[i] = raw
			vs[i] = syncDevice(t, faultstore.New(raw, faultstore.Options{Before: c.before, After: c.afterWrite}), hubCut)
			if p := policies[rng.IntN(len(policies))]; p == vault.Merge {
				require.NoError(t, vault.MergeWith(vs[i], "notes", func(local, hub Note) (Note, error) {
					return Note{min(local.Text, hub.Text)}, nil
				}))
			} else {
				require.NoError(t, vs[i].SetConflictPolicy("notes", p))
			}
			require.NoError(t, vs[i].SetConflictPolicy("receipts", receiptPolicies[rng.IntN(len(receiptPolicies))]))
			nr, err := vault.NumberingOf(vault.CollectionOf[Receipt](vs[i], "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
			require.NoError(t, err)
			rs[i] = nr
		}
		steps := 10 + rng.IntN(20)
		for step := range steps {
			d := rng.IntN(3)
			col := vault.CollectionOf[Note](vs[d], "notes")
			id := ids[rng.IntN(len(ids))]
			if rng.IntN(3) == 0 {
				receiptStep(t, rng, vs[d], rs[d], d, seed, step)
				continue
			}
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
		// Two rounds reach every device with every change; a device's
		// SyncAndSettle numbers every receipt on the hub, and two more
		// rounds bring the numbers everywhere.
		for round := range 4 {
			for i, v := range vs {
				sync := v.Sync
				if round == 2 && i == 0 {
					sync = v.SyncAndSettle
				}
				rep, err := sync(ctx)
				require.NoError(t, err, "seed %d", seed)
				pulled, pushed, conflicts = pulled+rep.Pulled, pushed+rep.Pushed, conflicts+len(rep.Conflicts)
			}
		}
		if t.Failed() {
			return
		}
		assertConverged(t, rawHub, devs, vs...)
		numbered += assertReceiptsNumbered(t, rawHub, devs, rs, seed, false)
		if t.Failed() {
			t.Fatalf("seed %d did not converge", seed)
		}
		for _, v := range vs {
			require.NoError(t, v.Close())
		}
	}
}

// receiptPolicies are the policies a schedule's receipts take (Manual and
// Merge keep or make records of their own: not a numbering concern).
var receiptPolicies = []vault.SyncPolicy{vault.HigherRevisionWins, vault.DeviceWins, vault.HubWins, vault.LastWriterWins, vault.FirstWriterWins}

// receiptStep is one receipt operation of a schedule on device d: a new
// receipt (deferred: pending, numbered by a pass on the hub), an edit of a
// receipt the device holds (pending or numbered), the deletion of a
// receipt the device holds pending (a draft dropped), or a pass on the
// hub.
func receiptStep(t *testing.T, rng *rand.Rand, v *vault.Vault, nr *vault.Numbered[Receipt], d int, seed uint64, step int) {
	t.Helper()
	ctx := context.Background()
	held := func() (string, bool) {
		var ids []string
		for r, err := range vault.CollectionOf[Receipt](v, "receipts").List(ctx) {
			require.NoError(t, err, "seed %d", seed)
			ids = append(ids, r.ID)
		}
		if len(ids) == 0 {
			return "", false
		}
		return ids[rng.IntN(len(ids))], true
	}
	switch op := rng.IntN(10); {
	case op < 4:
		r, err := nr.Put(ctx, fmt.Sprintf("r%d-%02d", d, step), Receipt{Total: step})
		require.NoError(t, err, "seed %d", seed)
		require.True(t, r.Pending, "seed %d", seed)
	case op < 7:
		if id, ok := held(); ok {
			_, err := nr.Put(ctx, id, Receipt{Total: 1000 + step})
			require.NoError(t, err, "seed %d", seed)
		}
	case op < 9:
		if id, ok := held(); ok {
			r, err := nr.Get(ctx, id)
			require.NoError(t, err, "seed %d", seed)
			if r.Pending {
				require.NoError(t, nr.Delete(ctx, id), "seed %d", seed)
			}
		}
	default:
		_, err := nr.Settle(ctx)
		require.NoError(t, err, "seed %d", seed)
	}
}

// assertReceiptsNumbered checks the receipts after the final syncs: the
// hub's receipts carry the numbers 1..K, each once (K receipts), none is
// pending, every device shows each receipt with the hub's number, no
// handoff entry is left on the hub or a device, and the series' audit is
// clean. It returns K.
//
// With voids, numbers the hub's ledger voids (NumberVoided: a pass killed
// after it recorded its batch, whose pending record a device then deleted,
// voids that record's number when the next pass finishes the batch) count
// with the receipts' numbers: together they are 1..K, each once. Without,
// no number may be voided.
func assertReceiptsNumbered(t *testing.T, hub stores.Store, devs []stores.Store, rs []*vault.Numbered[Receipt], seed uint64, voids bool) int {
	t.Helper()
	ctx := context.Background()
	h := openHubDirect(t, hub)
	onHub, err := vault.NumberingOf(vault.CollectionOf[Receipt](h, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	byID := map[string]uint64{}
	numbers := []uint64{}
	for r, err := range vault.CollectionOf[Receipt](h, "receipts").List(ctx) {
		require.NoError(t, err)
		got, err := onHub.Get(ctx, r.ID)
		require.NoError(t, err, "seed %d: %s", seed, r.ID)
		require.False(t, got.Pending, "seed %d: %s is pending on the hub", seed, r.ID)
		require.Equal(t, got.Serial.N, got.Value.Number, "seed %d: %s", seed, r.ID)
		byID[r.ID] = got.Serial.N
		numbers = append(numbers, got.Serial.N)
	}
	var voided []uint64
	for e, err := range h.Audit().Read(ctx, 1) {
		require.NoError(t, err)
		if e.Kind == ledger.NumberVoided && e.Series == "receipt" {
			voided = append(voided, e.Number)
		}
	}
	if !voids {
		assert.Empty(t, voided, "seed %d: voided numbers", seed)
	}
	all := append(append([]uint64{}, numbers...), voided...)
	slices.Sort(all)
	assert.Equal(t, seq1toN(len(all)), all, "seed %d: the receipts' numbers, with the voided", seed)
	for i, nr := range rs {
		for id, n := range byID {
			got, err := nr.Get(ctx, id)
			require.NoError(t, err, "seed %d device %d: %s", seed, i, id)
			assert.Equal(t, n, got.Serial.N, "seed %d device %d: %s", seed, i, id)
			assert.Equal(t, n, got.Value.Number, "seed %d device %d: %s", seed, i, id)
		}
		assert.Empty(t, keysUnder(t, devs[i], "v/shop/_numbering/receipt/pending/"), "seed %d device %d", seed, i)
	}
	assert.Empty(t, keysUnder(t, hub, "v/shop/_numbering/receipt/pending/"), "seed %d hub", seed)
	audit, err := rs[0].Audit(ctx)
	require.NoError(t, err, "seed %d", seed)
	assert.Equal(t, len(numbers), audit.Numbered(), "seed %d", seed)
	assert.Equal(t, len(voided), audit.Deferred.Voided, "seed %d", seed)
	assert.True(t, audit.Clean(), "seed %d: %+v", seed, audit)
	require.NoError(t, h.Close())
	return len(numbers)
}
