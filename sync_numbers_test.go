package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// receiptDevice opens a device of hub with the receipts' numbering handle,
// the receipts' conflicts decided by pol.
func receiptDevice(t *testing.T, dev, hub stores.Store, pol vault.SyncPolicy) (*vault.Vault, *vault.Numbered[Receipt]) {
	t.Helper()
	v := openOnHub(t, dev, hub, deviceOpts{})
	require.NoError(t, v.SetConflictPolicy("receipts", pol))
	nr, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	return v, nr
}

// hubReceipt reads receipt id as the hub holds it, through a plain vault on
// the hub store.
func hubReceipt(t *testing.T, hub stores.Store, id string) (vault.NumberedRecord[Receipt], error) {
	t.Helper()
	h := openHubDirect(t, hub)
	defer func() { _ = h.Close() }()
	nr, err := vault.NumberingOf(vault.CollectionOf[Receipt](h, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	return nr.Get(context.Background(), id)
}

// TestSyncKeepsTheHubsNumberInAConflict: a receipt written on device A
// reaches device B pending; A's SyncAndSettle numbers it on the hub, while
// B edits it offline. B's sync meets the conflict: whichever side the
// policy picks (under DeviceWins B's edit, under HubWins the stamped
// revision; the others decide by revision or time, the stamp counting as
// the hub's write), the record keeps the hub's number, so the hub never
// serves it pending again (no ErrRollback), and every side shows the same
// number and value. A deletion of the pending receipt on B loses to the
// numbered revision whatever the policy.
func TestSyncKeepsTheHubsNumberInAConflict(t *testing.T) {
	for _, pol := range []vault.SyncPolicy{vault.DeviceWins, vault.HigherRevisionWins, vault.HubWins, vault.LastWriterWins} {
		t.Run(pol.String(), func(t *testing.T) {
			ctx := context.Background()
			hub := memstore.New()
			va, ra := receiptDevice(t, memstore.New(), hub, pol)
			vb, rb := receiptDevice(t, memstore.New(), hub, pol)
			_, err := ra.Put(ctx, "r1", Receipt{Total: 10})
			require.NoError(t, err)
			_, err = ra.Put(ctx, "r2", Receipt{Total: 20})
			require.NoError(t, err)
			assert.Equal(t, vault.SyncReport{Pushed: 2}, mustSync(t, va))
			assert.Equal(t, vault.SyncReport{Pulled: 2}, mustSync(t, vb))

			// B edits r1 and deletes r2, both pending there; A numbers them.
			r, err := rb.Put(ctx, "r1", Receipt{Total: 11})
			require.NoError(t, err)
			require.True(t, r.Pending)
			require.NoError(t, rb.Delete(ctx, "r2"))
			rep, err := va.SyncAndSettle(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, rep.Settled["receipt"].Assigned)

			rep = mustSync(t, vb)
			require.Len(t, rep.Conflicts, 2, "%+v", rep)
			for _, c := range rep.Conflicts {
				if c.ID == "r2" {
					assert.True(t, c.HubWon, "a deletion loses to a number")
					assert.True(t, c.DeviceDeleted)
				}
			}
			mustSync(t, va)
			mustSync(t, vb)

			// r2 is back (the deletion lost); r1 is B's edit where B won.
			want := map[string]int{"r2": 20}
			switch pol {
			case vault.DeviceWins:
				want["r1"] = 11
			case vault.HubWins:
				want["r1"] = 10
			}
			for _, id := range []string{"r1", "r2"} {
				got, err := hubReceipt(t, hub, id)
				require.NoError(t, err, id)
				assert.False(t, got.Pending, id)
				assert.Equal(t, got.Serial.N, got.Value.Number, id)
				if total, ok := want[id]; ok {
					assert.Equal(t, total, got.Value.Total, id)
				}
				for i, nr := range []*vault.Numbered[Receipt]{ra, rb} {
					dev, err := nr.Get(ctx, id)
					require.NoError(t, err, "device %d %s", i, id)
					assert.Equal(t, got.Serial, dev.Serial, "device %d %s", i, id)
					assert.Equal(t, got.Value, dev.Value, "device %d %s", i, id)
				}
			}
			a, err := hubReceipt(t, hub, "r1")
			require.NoError(t, err)
			b, err := hubReceipt(t, hub, "r2")
			require.NoError(t, err)
			assert.ElementsMatch(t, []uint64{1, 2}, []uint64{a.Serial.N, b.Serial.N})
			audit, err := ra.Audit(ctx)
			require.NoError(t, err)
			assert.True(t, audit.Clean(), "%+v", audit)
			assert.Equal(t, 2, audit.Numbered())
			assertConverged(t, hub, nil, va, vb)
		})
	}
}

// TestSyncCarriesAndDropsHandoffEntries: a push of a pending receipt
// carries its handoff entry to the hub (so a pass run from any device
// numbers it); a push of its deletion removes that entry in the same hub
// commit, so no pass waits for the receipt; a pull of the stamped receipt
// drops the device's own entry.
func TestSyncCarriesAndDropsHandoffEntries(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	const pending = "v/shop/_numbering/receipt/pending/"
	da, db := memstore.New(), memstore.New()
	va, ra := receiptDevice(t, da, hub, vault.HigherRevisionWins)
	vb, rb := receiptDevice(t, db, hub, vault.HigherRevisionWins)
	_, err := ra.Put(ctx, "keep", Receipt{Total: 1})
	require.NoError(t, err)
	_, err = ra.Put(ctx, "drop", Receipt{Total: 2})
	require.NoError(t, err)
	require.Len(t, keysUnder(t, da, pending), 2)
	mustSync(t, va)
	require.Len(t, keysUnder(t, hub, pending), 2, "the entries travel with their records")

	require.NoError(t, ra.Delete(ctx, "drop"))
	mustSync(t, va)
	left := keysUnder(t, hub, pending)
	require.Len(t, left, 1)
	assert.Contains(t, left[0], "/keep")

	// B never held these receipts, and numbers them.
	mustSync(t, vb)
	rep, err := rb.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Assigned)
	assert.Zero(t, rep.Waiting)
	assert.Empty(t, keysUnder(t, hub, pending))
	mustSync(t, va)
	assert.Empty(t, keysUnder(t, da, pending), "the stamped receipt's pull drops the device's entry")
	got, err := ra.Get(ctx, "keep")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), got.Serial.N)
	assert.False(t, got.Pending)
}

// TestSyncPutNumberedCopyIsTheBase: a record PutNumbered on a device (its
// number taken on the hub, then copied here) and edited here before any
// sync is pushed as a plain change: the copy is the record's sync base, so
// there is no conflict, even under HubWins, and the edit is not lost.
func TestSyncPutNumberedCopyIsTheBase(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	v := openOnHub(t, memstore.New(), hub, deviceOpts{})
	require.NoError(t, v.SetConflictPolicy("invoices", vault.HubWins))
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")
	_, err = inv.PutNumbered(ctx, "i1", q, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted, Customer: "ACME"}, nil
	})
	require.NoError(t, err)
	require.NoError(t, inv.Put(ctx, "i1", Invoice{Number: "1", Customer: "ACME Ltd"}))
	assert.Equal(t, vault.SyncReport{Pushed: 1}, mustSync(t, v))
	h := openHubDirect(t, hub)
	got, err := vault.CollectionOf[Invoice](h, "invoices").Get(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, "ACME Ltd", got.Customer)
}

// TestSyncSeriesOnADevice: a device's Series lists the hub's series, where
// its numbers were taken; offline it fails with sequence.ErrOffline.
func TestSyncSeriesOnADevice(t *testing.T) {
	ctx := context.Background()
	hub := newSwitchedHub()
	v := openOnHub(t, memstore.New(), hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	for i := range 3 {
		_, err := vault.CollectionOf[Invoice](v, "invoices").PutNumbered(ctx, fmt.Sprintf("i%d", i), q, func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted}, nil
		})
		require.NoError(t, err)
	}
	list, err := v.Series(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "invoice", list[0].Name)
	assert.Equal(t, uint64(3), list[0].Head)
	named, err := v.SeriesNamed(ctx, "invoice")
	require.NoError(t, err)
	assert.Equal(t, list, named)

	hub.down.Store(true)
	_, err = v.Series(ctx)
	require.ErrorIs(t, err, sequence.ErrOffline)
	assert.True(t, errors.Is(err, stores.ErrUnavailable))
}

// TestSyncerSettlesNumbers: a Syncer with SettleNumbers numbers the
// receipts each sync pushes, and brings them back numbered; one without
// leaves them pending.
func TestSyncerSettlesNumbers(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	v, nr := receiptDevice(t, memstore.New(), hub, vault.HigherRevisionWins)
	plain, err := v.SyncEvery(ctx, time.Hour)
	require.NoError(t, err)
	_, err = nr.Put(ctx, "r1", Receipt{Total: 5})
	require.NoError(t, err)
	rep, err := plain.SyncNow(ctx)
	require.NoError(t, err)
	assert.Nil(t, rep.Settled)
	plain.Stop()
	got, err := nr.Get(ctx, "r1")
	require.NoError(t, err)
	assert.True(t, got.Pending)

	s, err := v.SyncEvery(ctx, time.Hour, vault.SettleNumbers())
	require.NoError(t, err)
	defer s.Stop()
	rep, err = s.SyncNow(ctx) // the Syncer's first sync may have numbered it already
	require.NoError(t, err)
	assert.Contains(t, rep.Settled, "receipt")
	got, err = nr.Get(ctx, "r1")
	require.NoError(t, err)
	assert.False(t, got.Pending)
	assert.Equal(t, Receipt{Number: 1, Total: 5}, got.Value)
}

// TestNumberedAuditCountsAPassVoid: a receipt deleted after the pass on
// the hub recorded its batch, before the pass stamped it, has its number
// voided (numbering's NumberVoided, naming the record). The series' audit
// on a device accounts for it as voided, once: the pass's numbers are the
// series' (one head for both paths), and the audit takes none of them for
// a rollback.
func TestNumberedAuditCountsAPassVoid(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	var armed, struck atomic.Bool
	hub := faultstore.New(inner, faultstore.Options{After: func(op faultstore.Op, _ string) error {
		// The pass's first transaction records its batch; the receipt
		// goes before the pass stamps it.
		if op == faultstore.OpUpdate && armed.Load() && struck.CompareAndSwap(false, true) {
			require.NoError(t, inner.Delete(ctx, "v/shop/receipts/r2"))
		}
		return nil
	}})
	v, nr := receiptDevice(t, memstore.New(), hub, vault.HigherRevisionWins)
	for _, id := range []string{"r1", "r2", "r3"} {
		_, err := nr.Put(ctx, id, Receipt{Total: 1})
		require.NoError(t, err)
	}
	mustSync(t, v)
	armed.Store(true)
	rep, err := nr.Settle(ctx)
	require.NoError(t, err)
	require.True(t, struck.Load(), "the pass ran no transaction")
	assert.Equal(t, 2, rep.Assigned)
	assert.Equal(t, 1, rep.Voided)
	audit, err := nr.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, audit.Numbered())
	assert.Equal(t, 1, audit.Deferred.Voided)
	assert.Equal(t, 1, audit.Online.Voided, "one head: the series' audit has the pass's void")
	assert.True(t, audit.Clean(), "%+v", audit)
}
