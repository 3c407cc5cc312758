package noydb_test

import (
	"context"
	"slices"
	"sync"
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

// openStandalone opens the vault "shop" as alice on device alone, with no
// hub, as openOnHub opens it with one.
func openStandalone(t testing.TB, device stores.Store) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), vault.Config{
		Store: device, Name: "shop", User: "alice", Secret: []byte("s3cret"),
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	return v
}

// takeFrom takes n numbers of series (opened with opts) from v, in order.
func takeFrom(t testing.TB, v *vault.Vault, series string, opts sequence.Options, n int) []uint64 {
	t.Helper()
	q, err := v.Sequence(series, opts)
	require.NoError(t, err)
	out := make([]uint64, n)
	for i := range out {
		out[i], err = q.Next(context.Background())
		require.NoError(t, err)
	}
	return out
}

// TestHubJoinContinuesNumbers: a vault that took numbers 1..N on its own
// device, then joins a hub, continues there at N+1, in every series it
// numbered (a partitioned one too), on the device that joined and on any
// other device of the hub: the numbers of the device alone and those taken
// on the hub, by two devices at once, are exactly 1..N+M, none twice.
// Before the fix the hub's series started again at 1.
func TestHubJoinContinuesNumbers(t *testing.T) {
	for hubName, newHub := range memAndBadger() {
		for devName, newDev := range memAndBadger() {
			t.Run(hubName+"-hub/"+devName+"-device", func(t *testing.T) {
				hubJoinContinues(t, newHub(t), newDev(t), newDev(t))
			})
		}
	}
}

// TestHubJoinPG runs the join's continued numbering and its refusal with a
// PostgreSQL hub (scripts/with-postgres).
func TestHubJoinPG(t *testing.T) {
	dbURL := pgtest.URL(t)
	t.Run("continues", func(t *testing.T) {
		hubJoinContinues(t, openPGHub(t, dbURL, pgtest.Schema(t)), memstore.New(), memstore.New())
	})
	t.Run("refused", func(t *testing.T) {
		hubJoinRefused(t, openPGHub(t, dbURL, pgtest.Schema(t)))
	})
}

// hubJoinContinues is TestHubJoinContinuesNumbers on hub, with the vault
// taking numbers on devA alone first and devB a device of the hub only.
func hubJoinContinues(t *testing.T, hub, devA, devB stores.Store) {
	const before, workers, perWorker = 5, 4, 10
	ctx := context.Background()
	solo := openStandalone(t, devA)
	got := takeFrom(t, solo, "orders", sequence.Options{}, before)
	assert.Equal(t, seq1toN(before), got)
	fatture := sequence.Options{Partition: []any{2026, "EU"}}
	assert.Equal(t, seq1toN(2), takeFrom(t, solo, "fatture", fatture, 2))
	require.NoError(t, solo.Close())

	a := openOnHub(t, devA, hub, deviceOpts{stateDir: t.TempDir()})
	b := openOnHub(t, devB, hub, deviceOpts{stateDir: t.TempDir()})
	assert.Equal(t, []uint64{3}, takeFrom(t, b, "fatture", fatture, 1), "the partition continues")

	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, v := range []*vault.Vault{a, b} {
		for range workers {
			wg.Go(func() {
				q, err := v.Sequence("orders", sequence.Options{})
				if !assert.NoError(t, err) {
					return
				}
				for range perWorker {
					n, err := q.Next(ctx)
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					got = append(got, n)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	slices.Sort(got)
	assert.Equal(t, seq1toN(before+2*workers*perWorker), got, "every number once, the device's own included")

	infos, err := a.SeriesNamed(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, uint64(before+2*workers*perWorker), infos[0].Head)
}

// TestHubJoinContinuesPeriods: a series with periods (fiscal years, a
// format and a zone) numbered on the device alone continues on the hub in
// each of its periods, with its definition: a handle opened with the
// definition, one opened without (the stored definition), and a device
// that never held the vault all continue after the device's head, and a
// period closed on the device stays closed. Before the fix each period
// started again at 1 on the hub.
func TestHubJoinContinuesPeriods(t *testing.T) {
	ctx := context.Background()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	opts := sequence.Options{Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location: rome, Format: "FY{FY}/{seq:04}"}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, rome) }

	hub, devA := memstore.New(), memstore.New()
	solo := openStandalone(t, devA)
	q, err := solo.Sequence("invoices", opts)
	require.NoError(t, err)
	for i := range 3 {
		s, err := q.At(day(2026, 4, 2)).NextSerial(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), s.N)
	}
	for range 2 {
		_, err := q.NextAt(ctx, day(2026, 3, 1))
		require.NoError(t, err)
	}
	require.NoError(t, q.ClosePeriod(ctx, "FY2025-26"))
	require.NoError(t, solo.Close())

	a := openOnHub(t, devA, hub, deviceOpts{})
	qa, err := a.Sequence("invoices", opts)
	require.NoError(t, err)
	s, err := qa.At(day(2026, 4, 5)).NextSerial(ctx)
	require.NoError(t, err)
	assert.Equal(t, "FY2026-27/0004", s.Formatted)

	plain, err := a.Sequence("invoices", sequence.Options{})
	require.NoError(t, err)
	n, err := plain.NextAt(ctx, day(2026, 5, 1))
	require.NoError(t, err)
	assert.Equal(t, uint64(5), n, "the stored definition is the device's")

	b := openOnHub(t, memstore.New(), hub, deviceOpts{})
	qb, err := b.Sequence("invoices", sequence.Options{})
	require.NoError(t, err)
	s, err = qb.At(day(2026, 6, 1)).NextSerial(ctx)
	require.NoError(t, err)
	assert.Equal(t, "FY2026-27/0006", s.Formatted)

	_, err = qb.NextAt(ctx, day(2026, 3, 10))
	require.ErrorIs(t, err, sequence.ErrPeriodClosed, "the period closed on the device is closed on the hub")
	head, closed, err := qb.PeekPeriod(ctx, "FY2025-26")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), head)
	assert.True(t, closed)
}

// TestHubJoinSeedsWhenTheHubComesBack: a device that opens while the hub
// is down joins at its first call that reaches the hub, a Next in the
// middle of the sequences' own commit: the seed comes first, and the Next
// continues after the device's head.
func TestHubJoinSeedsWhenTheHubComesBack(t *testing.T) {
	ctx := context.Background()
	hub, dev := newSwitchedHub(), memstore.New()
	solo := openStandalone(t, dev)
	takeFrom(t, solo, "invoice", sequence.Options{}, 3)
	require.NoError(t, solo.Close())

	hub.down.Store(true)
	v := openOnHub(t, dev, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.ErrorIs(t, err, sequence.ErrOffline)

	hub.down.Store(false)
	n, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), n)
}

// TestHubJoinRefusedWhenHubBehind: two copies of one vault took numbers on
// their own; the first joins the hub (seeding it); the second, ahead of
// the hub, is refused with ErrHubBehind naming the series and both heads,
// and nothing changes on the hub or on the device. Seeding the hub from
// another device (a fresh store) lets it join, and it continues after its
// head. Before the fix the second device joined and took numbers the
// first had given. Had the hub given one of the second copy's numbers
// meanwhile, it would be refused for good (ErrHubDiverged, see
// TestHubJoinRefusesACopyWhoseNumbersTheHubGave).
func TestHubJoinRefusedWhenHubBehind(t *testing.T) {
	for hubName, newHub := range memAndBadger() {
		t.Run(hubName+"-hub", func(t *testing.T) { hubJoinRefused(t, newHub(t)) })
	}
}

// hubJoinRefused is TestHubJoinRefusedWhenHubBehind on hub.
func hubJoinRefused(t *testing.T, hub stores.Store) {
	ctx := context.Background()
	devA := memstore.New()
	solo := openStandalone(t, devA)
	takeFrom(t, solo, "orders", sequence.Options{}, 2)
	takeFrom(t, solo, "misc", sequence.Options{}, 1)
	require.NoError(t, solo.Close())
	devB := memstore.New()
	restoreStore(t, devB, snapshotStore(t, devA)) // a copy of the vault

	a := openOnHub(t, devA, hub, deviceOpts{})
	require.NoError(t, a.Close())

	soloB := openStandalone(t, devB)
	assert.Equal(t, []uint64{3, 4, 5}, takeFrom(t, soloB, "orders", sequence.Options{}, 3))
	require.NoError(t, soloB.Close())

	hubBefore, devBefore := snapshotStore(t, hub), snapshotStore(t, devB)
	_, err := openOnHubErr(devB, hub, deviceOpts{stateDir: t.TempDir()})
	require.ErrorIs(t, err, vault.ErrHubBehind)
	var be *vault.HubBehindError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, []vault.BehindSeries{{Series: "orders", Device: 5, Hub: 2}}, be.Series)
	assert.Equal(t, hubBefore, snapshotStore(t, hub), "the hub is unchanged")
	assert.Equal(t, devBefore, snapshotStore(t, devB), "the device is unchanged")

	// The device that joined before, at or below the hub, still opens.
	a = openOnHub(t, devA, hub, deviceOpts{})
	require.NoError(t, a.Close())

	// The way out: seed the hub from another device, then join.
	fresh := openOnHub(t, memstore.New(), hub, deviceOpts{})
	qf, err := fresh.Sequence("orders", sequence.Options{})
	require.NoError(t, err)
	require.NoError(t, qf.SeedTo(ctx, 5))
	b := openOnHub(t, devB, hub, deviceOpts{})
	assert.Equal(t, []uint64{6}, takeFrom(t, b, "orders", sequence.Options{}, 1))
}
