package hostilehub_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// TestHubRollsBackCounters: the hub puts its counters back as they were
// (the _sequences/ prefix of a backup) and keeps its ledger. The next
// number fails with ErrRollback on the device that took the numbers (its
// pins) and on a device new to the hub (the counter is checked against
// the ledger), so no number is given twice.
func TestHubRollsBackCounters(t *testing.T) {
	eachSetup(t, func(t *testing.T, s setup) {
		ctx := context.Background()
		a := openDevice(t, s.newDevice(t), s.hub.Store(), deviceOpts{stateDir: t.TempDir()})
		assert.Equal(t, []uint64{1}, take(t, a, "orders", 1))
		snap, err := s.hub.Snapshot(ctx)
		require.NoError(t, err)
		assert.Equal(t, []uint64{2, 3}, take(t, a, "orders", 2))
		require.NoError(t, s.hub.Restore(ctx, snap, "v/shop/_sequences/"))

		for name, v := range map[string]*vault.Vault{
			"the device that took them": a,
			"a device new to the hub":   openDevice(t, s.newDevice(t), s.hub.Store(), deviceOpts{}),
		} {
			q, err := v.Sequence("orders", sequence.Options{})
			require.NoError(t, err)
			_, err = q.Next(ctx)
			assert.ErrorIs(t, err, vault.ErrRollback, name)
		}
	})
}

// TestHubRollsBackTheFeed: the hub puts its ledger (the change feed) back
// as it was, records and counters kept. A device that saw the newer feed
// gets ErrRollback at its next number and its next sync.
func TestHubRollsBackTheFeed(t *testing.T) {
	eachSetup(t, func(t *testing.T, s setup) {
		ctx := context.Background()
		a := openDevice(t, s.newDevice(t), s.hub.Store(), deviceOpts{stateDir: t.TempDir()})
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"xylophone"}))
		mustSync(t, a)
		snap, err := s.hub.Snapshot(ctx)
		require.NoError(t, err)
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "x", Note{"xenon"}))
		mustSync(t, a)
		take(t, a, "orders", 1)
		require.NoError(t, s.hub.Restore(ctx, snap, "v/shop/_ledger/"))

		q, err := a.Sequence("orders", sequence.Options{})
		require.NoError(t, err)
		_, err = q.Next(ctx)
		assert.ErrorIs(t, err, vault.ErrRollback, "a number")
		_, err = a.Sync(ctx)
		assert.ErrorIs(t, err, vault.ErrRollback, "a sync")
	})
}

// TestHubRollsBackPassState: the hub puts the state of a series numbered
// by passes (its _numbering/ prefix) back as it was before a pass, and
// keeps its ledger and the stamped records. The next pass must not give a
// number twice unnoticed: today the audit of the series says so.
func TestHubRollsBackPassState(t *testing.T) {
	eachSetup(t, func(t *testing.T, s setup) {
		ctx := context.Background()
		a := openDevice(t, s.newDevice(t), s.hub.Store(), deviceOpts{})
		ra, err := vault.NumberingOf(vault.CollectionOf[Order](a, "receipts"), "receipts", sequence.Options{},
			func(o *Order, sr sequence.Serial) { o.Number = sr.Formatted })
		require.NoError(t, err)
		snap, err := s.hub.Snapshot(ctx)
		require.NoError(t, err)
		for i := range 2 {
			_, err := ra.Put(ctx, fmt.Sprintf("r%d", i), Order{Total: i})
			require.NoError(t, err)
		}
		mustSync(t, a)
		rep, err := ra.Settle(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, rep.Assigned)
		mustSync(t, a)
		require.NoError(t, s.hub.Restore(ctx, snap, "v/shop/_numbering/"))

		b := openDevice(t, s.newDevice(t), s.hub.Store(), deviceOpts{})
		rb, err := vault.NumberingOf(vault.CollectionOf[Order](b, "receipts"), "receipts", sequence.Options{},
			func(o *Order, sr sequence.Serial) { o.Number = sr.Formatted })
		require.NoError(t, err)
		_, err = rb.Put(ctx, "r2", Order{Total: 2})
		require.NoError(t, err)
		mustSync(t, b)
		_, passErr := rb.Settle(ctx)
		mustSync(t, b)
		var got []string
		for r, err := range vault.CollectionOf[Order](b, "receipts").List(ctx) {
			require.NoError(t, err)
			if r.Value.Number != "" {
				got = append(got, r.Value.Number)
			}
		}
		slices.Sort(got)
		if passErr != nil {
			assert.ErrorIs(t, passErr, vault.ErrRollback, "the pass refuses")
			return
		}
		if len(slices.Compact(slices.Clone(got))) == len(got) {
			return // no number twice
		}
		_, err = rb.Audit(ctx)
		assert.ErrorIs(t, err, numbering.ErrDuplicate, "numbers %v: the audit says a number was given twice", got)
	})
}
