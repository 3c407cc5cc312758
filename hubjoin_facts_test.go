package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// TestHubJoinRefusesACopyWhoseNumbersTheHubGave: a vault's store is copied
// at orders = 3. The original joins a hub, which gives 4, 5 and 6. The
// copy, never on a hub, gives 4 and 5 to records of its own, then joins:
// it is refused with ErrHubDiverged naming orders 4-5, and nothing is
// written on the hub or on the copy. Its numbers are below the hub's head,
// so comparing heads did not see them: before the fix the copy joined and
// pushed its two records, and the hub held two orders numbered 4 and two
// numbered 5. An untouched copy of the same moment joins, and so does the
// original again.
func TestHubJoinRefusesACopyWhoseNumbersTheHubGave(t *testing.T) {
	for hubName, newHub := range memAndBadger() {
		for devName, newDev := range memAndBadger() {
			t.Run(devName+"-devices/"+hubName+"-hub", func(t *testing.T) {
				copyJoinsLate(t, newHub(t), newDev(t), newDev(t), newDev(t))
			})
		}
	}
}

// TestHubJoinFactsPG runs the join's proof of its numbers, and the
// corrections of the numbers a join brought, with a PostgreSQL hub
// (scripts/with-postgres).
func TestHubJoinFactsPG(t *testing.T) {
	t.Run("copy refused", func(t *testing.T) {
		copyJoinsLate(t, pgtest.Open(t, nil), memstore.New(), memstore.New(), memstore.New())
	})
	t.Run("corrections", func(t *testing.T) {
		correctBroughtNumbers(t, pgtest.Open(t, nil), memstore.New())
	})
}

// copyStoreTo copies every key of src into dst.
func copyStoreTo(t testing.TB, src, dst stores.Store) {
	t.Helper()
	restoreStore(t, dst, snapshotStore(t, src))
}

func copyJoinsLate(t *testing.T, hub, devA, devB, devC stores.Store) {
	ctx := context.Background()
	solo := openStandalone(t, devA)
	orders := vault.CollectionOf[Invoice](solo, "orders")
	q, err := solo.Sequence("orders", sequence.Options{Format: "O-{seq:03}"})
	require.NoError(t, err)
	put := func(c *vault.Collection[Invoice], q *sequence.Sequence, id string) string {
		inv, err := c.PutNumbered(ctx, id, q, func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted, Total: 10}, nil
		})
		require.NoError(t, err)
		return inv.Number
	}
	for _, id := range []string{"a1", "a2", "a3"} {
		put(orders, q, id)
	}
	require.NoError(t, solo.Close())
	copyStoreTo(t, devA, devB) // the copy that goes on by itself
	copyStoreTo(t, devA, devC) // a copy left as it was

	a := openOnHub(t, devA, hub, deviceOpts{})
	qa, err := a.Sequence("orders", sequence.Options{})
	require.NoError(t, err)
	oa := vault.CollectionOf[Invoice](a, "orders")
	assert.Equal(t, []string{"O-004", "O-005", "O-006"}, []string{put(oa, qa, "a4"), put(oa, qa, "a5"), put(oa, qa, "a6")})
	mustSync(t, a)

	soloB := openStandalone(t, devB)
	qb, err := soloB.Sequence("orders", sequence.Options{})
	require.NoError(t, err)
	ob := vault.CollectionOf[Invoice](soloB, "orders")
	assert.Equal(t, []string{"O-004", "O-005"}, []string{put(ob, qb, "b4"), put(ob, qb, "b5")})
	require.NoError(t, soloB.Close())

	hubBefore, devBefore := snapshotStore(t, hub), snapshotStore(t, devB)
	_, err = openOnHubErr(devB, hub, deviceOpts{stateDir: t.TempDir()})
	require.ErrorIs(t, err, vault.ErrHubDiverged)
	var de *vault.HubDivergedError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, []vault.DivergedSeries{{Series: "orders", Numbers: []vault.NumberRange{{From: 4, To: 5}}}}, de.Series)
	assert.Contains(t, err.Error(), "orders: 4-5")
	assert.Equal(t, hubBefore, snapshotStore(t, hub), "the hub is unchanged")
	assert.Equal(t, devBefore, snapshotStore(t, devB), "the copy is unchanged")

	c := openOnHub(t, devC, hub, deviceOpts{})
	mustSync(t, c)
	qc, err := c.Sequence("orders", sequence.Options{})
	require.NoError(t, err)
	n, err := qc.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(7), n, "the untouched copy joins and numbers on")
	require.NoError(t, a.Close())
	a = openOnHub(t, devA, hub, deviceOpts{})
	mustSync(t, a)
	got := map[string]string{}
	for r, err := range vault.CollectionOf[Invoice](a, "orders").List(ctx) {
		require.NoError(t, err)
		got[r.ID] = r.Value.Number
	}
	assert.Equal(t, map[string]string{"a1": "O-001", "a2": "O-002", "a3": "O-003", "a4": "O-004", "a5": "O-005", "a6": "O-006"}, got)
}

// TestHubJoinBroughtNumbersAreCorrectable: invoices numbered before a vault
// joins a hub stay issued there: a credit note corrects number 2 on the
// hub, from the device that joined and from another one, and number 3,
// voided on the device before the join, is voided on the hub (a credit
// note for it is refused, as it would be on the device). Before the fix
// the join seeded the hub's series over them, and the credit note got
// "number skipped by a seed, never issued here".
func TestHubJoinBroughtNumbersAreCorrectable(t *testing.T) {
	for hubName, newHub := range memAndBadger() {
		for devName, newDev := range memAndBadger() {
			t.Run(devName+"-devices/"+hubName+"-hub", func(t *testing.T) {
				correctBroughtNumbers(t, newHub(t), newDev(t))
			})
		}
	}
}

func correctBroughtNumbers(t *testing.T, hub, dev stores.Store) {
	ctx := context.Background()
	solo := openStandalone(t, dev)
	takeFrom(t, solo, "invoices", sequence.Options{}, 4)
	q, err := solo.Sequence("invoices", sequence.Options{})
	require.NoError(t, err)
	require.NoError(t, q.Void(ctx, 3, "spoiled"))
	require.NoError(t, solo.Close())

	a := openOnHub(t, dev, hub, deviceOpts{})
	credits, err := a.Sequence("credit-notes", sequence.Options{Corrects: "invoices"})
	require.NoError(t, err)
	s, err := credits.NextCorrecting(ctx, sequence.Ref{N: 2})
	require.NoError(t, err, "a number issued before the join is correctable on the hub")
	assert.Equal(t, uint64(1), s.N)
	_, err = credits.NextCorrecting(ctx, sequence.Ref{N: 3})
	assert.ErrorIs(t, err, sequence.ErrAlreadyVoided, "voided on the device, voided on the hub")

	b := openOnHub(t, memstore.New(), hub, deviceOpts{})
	cb, err := b.Sequence("credit-notes", sequence.Options{})
	require.NoError(t, err)
	s, err = cb.NextCorrecting(ctx, sequence.Ref{N: 4})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s.N)
	inv, err := b.Sequence("invoices", sequence.Options{})
	require.NoError(t, err)
	n, err := inv.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), n)

	rep, err := inv.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), rep.Head)
	assert.Equal(t, 1, rep.Voided)
	assert.Zero(t, rep.Missing)
	assert.Len(t, rep.CorrectedBy, 2)
}

// TestHubJoinBringsTheVoidsOfAPeriod: a number voided on the device in a
// fiscal year of a partitioned series is voided on the hub after the
// join, and another number of that year corrects. Before the fix the join
// voided through a handle that named the period twice, and failed.
func TestHubJoinBringsTheVoidsOfAPeriod(t *testing.T) {
	ctx := context.Background()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	opts := sequence.Options{Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location: rome, Format: "FY{FY}/{seq:04}", Partition: []any{"EU"}}
	day := time.Date(2026, 5, 2, 12, 0, 0, 0, rome)
	hub, dev := memstore.New(), memstore.New()
	solo := openStandalone(t, dev)
	q, err := solo.Sequence("invoices", opts)
	require.NoError(t, err)
	for range 3 {
		_, err := q.NextAt(ctx, day)
		require.NoError(t, err)
	}
	require.NoError(t, q.At(day).Void(ctx, 2, "spoiled"))
	require.NoError(t, solo.Close())
	a := openOnHub(t, dev, hub, deviceOpts{})
	cr, err := a.Sequence("credit-notes", sequence.Options{Corrects: "invoices", Period: sequence.PeriodFiscalYear,
		FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}, Location: rome})
	require.NoError(t, err)
	_, err = cr.At(day).NextCorrecting(ctx, sequence.Ref{Partition: []string{"EU"}, Period: "FY2026-27", N: 3})
	assert.NoError(t, err)
	_, err = cr.At(day).NextCorrecting(ctx, sequence.Ref{Partition: []string{"EU"}, Period: "FY2026-27", N: 2})
	assert.ErrorIs(t, err, sequence.ErrAlreadyVoided)
}

// TestHubJoinRefusesACounterBehindItsLedger: a vault's store drops its
// counter of orders, or puts back an older value of it, after the vault
// gave orders 1 to 3; then the vault joins a hub. The join is refused with
// ErrRollback, and nothing is written on the hub or on the device. Before
// the fix the join seeded the hub from the counter as it found it (none,
// or 1), and the hub gave orders 1 to 3 again.
func TestHubJoinRefusesACounterBehindItsLedger(t *testing.T) {
	for _, how := range []string{"dropped", "put back"} {
		for hubName, newHub := range memAndBadger() {
			for devName, newDev := range memAndBadger() {
				t.Run(how+"/"+devName+"-device/"+hubName+"-hub", func(t *testing.T) {
					joinWithCounterBehind(t, how, newHub(t), newDev(t))
				})
			}
		}
	}
}

func joinWithCounterBehind(t *testing.T, how string, hub, dev stores.Store) {
	ctx := context.Background()
	const counter = "v/shop/_sequences/orders"
	solo := openStandalone(t, dev)
	assert.Equal(t, []uint64{1}, takeFrom(t, solo, "orders", sequence.Options{}, 1))
	old, err := dev.Get(ctx, counter)
	require.NoError(t, err)
	assert.Equal(t, []uint64{2, 3}, takeFrom(t, solo, "orders", sequence.Options{}, 2))
	require.NoError(t, solo.Close())
	if how == "dropped" {
		require.NoError(t, dev.Delete(ctx, counter))
	} else {
		_, err := dev.Put(ctx, counter, old.Value)
		require.NoError(t, err)
	}

	hubBefore, devBefore := snapshotStore(t, hub), snapshotStore(t, dev)
	_, err = openOnHubErr(dev, hub, deviceOpts{stateDir: t.TempDir()})
	require.ErrorIs(t, err, vault.ErrRollback)
	assert.Contains(t, err.Error(), `series "orders"`)
	assert.Equal(t, hubBefore, snapshotStore(t, hub), "the hub is unchanged")
	assert.Equal(t, devBefore, snapshotStore(t, dev), "the device is unchanged")
}
