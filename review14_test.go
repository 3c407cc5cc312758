package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// adversariesWithCAS is adversaries with a memstore whose transactions are
// hidden: the compare-and-swap path.
func adversariesWithCAS() map[string]func(t testing.TB) *faultstore.Adversary {
	out := adversaries()
	out["memstore-cas"] = func(testing.TB) *faultstore.Adversary {
		return faultstore.NewAdversary(faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true}))
	}
	return out
}

// refusedEverywhere checks that every allocation path refuses a number
// dated into q's period of date with ErrRollback (or, when cached is set,
// ErrPeriodClosed: a session that closed the period and still holds the
// closed counter it wrote refuses without reading the store again).
// tx.Next and PutNumbered run when txs is set.
func refusedEverywhere(t *testing.T, v *vault.Vault, q *sequence.Sequence, date time.Time, txs, cached bool) {
	t.Helper()
	ctx := context.Background()
	check := func(err error, path string) {
		t.Helper()
		if cached && errors.Is(err, sequence.ErrPeriodClosed) {
			return
		}
		assert.ErrorIs(t, err, noydb.ErrRollback, path)
	}
	n, err := q.NextAt(ctx, date)
	assert.Zero(t, n)
	check(err, "NextAt")
	_, err = q.At(date).Claim(ctx, sequence.NewRequestID())
	check(err, "Claim")
	_, err = q.At(date).NextN(ctx, 2)
	check(err, "NextN")
	if !txs {
		return
	}
	_, err = vault.CollectionOf[Invoice](v, "invoices").PutNumbered(ctx, "late", q.At(date),
		func(s sequence.Serial) (Invoice, error) { return Invoice{Number: s.Formatted}, nil })
	check(err, "PutNumbered")
	err = v.Update(ctx, func(tx *vault.Tx) error {
		_, err := tx.Next(q.At(date))
		return err
	})
	check(err, "tx.Next")
}

// A closed period's counter replayed by the store to before the close (or
// deleted, for a period closed without numbers) is a rollback: the ledger
// records the close, so the period does not silently reopen, in this
// session or a later one.
func TestClosedPeriodReplayedIsRollback(t *testing.T) {
	ctx := context.Background()
	const key = "v/books/_sequences/inv\x002025"
	for storeName, newAdv := range adversariesWithCAS() {
		for _, c := range []struct {
			name    string
			numbers int
			undo    func(t *testing.T, adv *faultstore.Adversary, snap faultstore.Snapshot)
		}{
			{"replayed", 3, func(t *testing.T, adv *faultstore.Adversary, snap faultstore.Snapshot) {
				require.NoError(t, adv.Restore(ctx, snap, key))
			}},
			{"deleted", 0, func(t *testing.T, adv *faultstore.Adversary, _ faultstore.Snapshot) {
				require.NoError(t, adv.Drop(ctx, key))
			}},
		} {
			t.Run(storeName+"/"+c.name, func(t *testing.T) {
				adv := newAdv(t)
				db, v := openSession(t, adv.Store(), "")
				opts := sequence.Options{Period: sequence.PeriodYear}
				q, err := v.Sequence("inv", opts)
				require.NoError(t, err)
				for range c.numbers {
					_, err := q.NextAt(ctx, midday(2025, 6, 1))
					require.NoError(t, err)
				}
				_, err = q.NextAt(ctx, midday(2026, 1, 5)) // the series is defined
				require.NoError(t, err)
				snap, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				require.NoError(t, q.ClosePeriod(ctx, "2025"))
				c.undo(t, adv, snap)

				// The same session.
				refusedEverywhere(t, v, q, midday(2025, 7, 1), storeName != "memstore-cas", storeName == "memstore-cas")
				require.NoError(t, db.Close())

				// A later session.
				_, v2 := openSession(t, adv.Store(), "")
				q2, err := v2.Sequence("inv", opts)
				require.NoError(t, err)
				refusedEverywhere(t, v2, q2, midday(2025, 7, 1), storeName != "memstore-cas", false)
				if storeName == "memstore-cas" {
					return
				}
				// Nor through tx.Next first, in a third session.
				_, v3 := openSession(t, adv.Store(), "")
				q3, err := v3.Sequence("inv", opts)
				require.NoError(t, err)
				err = v3.Update(ctx, func(tx *vault.Tx) error {
					_, err := tx.Next(q3.At(midday(2025, 7, 1)))
					return err
				})
				assert.ErrorIs(t, err, noydb.ErrRollback, "tx.Next first")
				// Another period is not affected.
				n, err := q2.NextAt(ctx, midday(2026, 1, 6))
				require.NoError(t, err)
				assert.Equal(t, uint64(2), n)
			})
		}
	}
}

// The store deletes a series' stored definition after numbers were taken
// under it: a handle opened with another definition must not define the
// series anew (its numbers would render, or count, another way), since the
// ledger records the first definition.
func TestDeletedDefinitionIsRollback(t *testing.T) {
	ctx := context.Background()
	const defKey = "v/books/_sequences/inv\x01d\x00"
	for storeName, newAdv := range adversariesWithCAS() {
		t.Run(storeName, func(t *testing.T) {
			adv := newAdv(t)
			db, v := openSession(t, adv.Store(), "")
			q, err := v.Sequence("inv", sequence.Options{Format: "R-{seq:05}"})
			require.NoError(t, err)
			s, err := q.NextSerial(ctx)
			require.NoError(t, err)
			require.Equal(t, "R-00001", s.Formatted)
			require.NoError(t, db.Close())
			require.NoError(t, adv.Drop(ctx, defKey))

			before, err := adv.Snapshot(ctx)
			require.NoError(t, err)

			_, v2 := openSession(t, adv.Store(), "")
			other, err := v2.Sequence("inv", sequence.Options{Format: "X-{seq}"})
			require.NoError(t, err)
			s, err = other.NextSerial(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback, "defined anew as %q", s.Formatted)
			_, err = other.Peek(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback, "peek")
			// A handle without a definition does not number the series
			// as undefined either, on both paths.
			plain, err := v2.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			s, err = plain.NextSerial(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback, "numbered as undefined: %q", s.Formatted)
			if storeName != "memstore-cas" { // tx.Next needs transactions
				_, v3 := openSession(t, adv.Store(), "")
				plain3, err := v3.Sequence("inv", sequence.Options{})
				require.NoError(t, err)
				err = v3.Update(ctx, func(tx *vault.Tx) error {
					s, err := tx.Next(plain3)
					assert.Empty(t, s.Formatted)
					return err
				})
				assert.ErrorIs(t, err, noydb.ErrRollback, "tx.Next")
			}
			after, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing taken, nothing defined")
		})
	}
}

// The gap report of one period (Audit of a handle of At) of a series whose
// period was seeded to 2,026,000,000, with a few facts: its memory follows
// the facts, not the numbers, and other periods' facts are not in it.
func TestPeriodAuditOfAHugeSeed(t *testing.T) {
	ctx := context.Background()
	const seed = 2_026_000_000
	_, v := openSession(t, memstore.New(), "")
	q, err := v.Sequence("inv", sequence.Options{Period: sequence.PeriodYear})
	require.NoError(t, err)
	p := q.At(midday(2026, 5, 1))
	require.NoError(t, p.SeedTo(ctx, seed))
	for range 3 {
		_, err := p.Next(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, p.Void(ctx, seed+2, "cancelled"))
	_, err = q.NextAt(ctx, midday(2025, 5, 1)) // another period
	require.NoError(t, err)

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := p.Audit(ctx)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("audit of a period seeded to %d plus 3 numbers: %d bytes allocated", seed, allocated)
	assert.Equal(t, sequence.AuditReport{
		Series: "inv", Period: "2026", Head: seed + 3,
		Runs: []sequence.Run{
			{From: 1, To: seed, State: sequence.StateSeeded},
			{From: seed + 1, To: seed + 1, State: sequence.StateUnbound},
			{From: seed + 2, To: seed + 2, State: sequence.StateVoided, Reason: "cancelled"},
			{From: seed + 3, To: seed + 3, State: sequence.StateUnbound},
		},
		Seeded: seed, Unbound: 2, Voided: 1,
	}, rep)
	assert.Less(t, allocated, uint64(1<<20), "bytes allocated by the audit")
}

// A close racing callers on every vault allocation path (NextAt, NextN,
// PutNumbered, tx.Next): the numbers returned are exactly 1..head at the
// close, each with its ledger entry, and no record carries a number above
// it.
func TestVaultCloseRacingEveryPath(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			q, err := v.Sequence("inv", sequence.Options{Period: sequence.PeriodMonth, Format: "{seq}"})
			require.NoError(t, err)
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			date := midday(2026, 2, 10)
			paths := []func(i, j int) ([]uint64, error){
				func(int, int) ([]uint64, error) { n, err := q.NextAt(ctx, date); return []uint64{n}, err },
				func(int, int) ([]uint64, error) {
					first, err := q.At(date).NextN(ctx, 2)
					return []uint64{first, first + 1}, err
				},
				func(i, j int) ([]uint64, error) {
					var n uint64
					_, err := invoices.PutNumbered(ctx, fmt.Sprintf("p%d-%d", i, j), q.At(date), func(s sequence.Serial) (Invoice, error) {
						n = s.N
						return Invoice{Number: s.Formatted}, nil
					})
					return []uint64{n}, err
				},
				func(i, j int) ([]uint64, error) {
					var n uint64
					err := v.Update(ctx, func(tx *vault.Tx) error {
						s, err := tx.Next(q.At(date))
						n = s.N
						return err
					})
					return []uint64{n}, err
				},
			}
			const callers, before = 8, 24
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				got   []uint64
				taken = make(chan struct{}, before)
			)
			for i := range callers {
				wg.Go(func() {
					for j := 0; ; j++ {
						ns, err := paths[(i+j)%len(paths)](i, j)
						if errors.Is(err, sequence.ErrPeriodClosed) {
							return
						}
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						got = append(got, ns...)
						mu.Unlock()
						select {
						case taken <- struct{}{}:
						default:
						}
					}
				})
			}
			for range before {
				<-taken
			}
			require.NoError(t, q.ClosePeriod(ctx, "2026-02"))
			wg.Wait()
			closes := entriesOfKind(t, v, ledger.PeriodClosed)
			require.Len(t, closes, 1)
			head := closes[0].Number
			exactlyOneToN(t, got, head)
			assert.Len(t, entriesOfKind(t, v, ledger.NumberAllocated), int(head))
			after, closed, err := q.PeekPeriod(ctx, "2026-02")
			require.NoError(t, err)
			assert.True(t, closed)
			assert.Equal(t, head, after)
		})
	}
}

// Two DBs over one store define one series differently, each with callers
// in flight: exactly one definition is stored, every number taken renders
// the winner's way, the numbers are exactly 1..N, and the loser's callers
// get a *DefinitionError (ErrDefinitionMismatch) and take nothing.
func TestDefinitionRaceAcrossTwoDBs(t *testing.T) {
	ctx := context.Background()
	_, v1, v2 := twoDBsOnBadger(t)
	formats := []string{"A-{seq:04}", "B-{seq:04}"}
	var handles []*sequence.Sequence
	for i, v := range []*vault.Vault{v1, v2} {
		q, err := v.Sequence("inv", sequence.Options{Format: formats[i]})
		require.NoError(t, err)
		handles = append(handles, q)
	}
	const callers = 16
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		serials  = map[int][]sequence.Serial{}
		mismatch [2]int
	)
	for i := range callers {
		wg.Go(func() {
			s, err := handles[i%2].NextSerial(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				var de *sequence.DefinitionError
				if assert.ErrorAs(t, err, &de) && assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch) {
					mismatch[i%2]++
				}
				return
			}
			serials[i%2] = append(serials[i%2], s)
		})
	}
	wg.Wait()
	require.True(t, len(serials[0]) == 0 || len(serials[1]) == 0, "both definitions took numbers: %v", serials)
	winner := 0
	if len(serials[0]) == 0 {
		winner = 1
	}
	assert.Zero(t, mismatch[winner], "the winner's callers are not refused")
	var got []uint64
	for _, s := range serials[winner] {
		assert.Equal(t, fmt.Sprintf("%c-%04d", 'A'+winner, s.N), s.Formatted)
		got = append(got, s.N)
	}
	exactlyOneToN(t, got, uint64(len(got)))
	assert.Len(t, entriesOfKind(t, v1, ledger.SeriesDefined), 1)
	// The loser's handles opened without options now number the winner's way.
	for _, v := range []*vault.Vault{v1, v2} {
		q, err := v.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		s, err := q.NextSerial(ctx)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("%c-%04d", 'A'+winner, s.N), s.Formatted)
	}
}

// Series lists every period of a series with many periods, each with its
// head and closed flag, and the partition without the period.
func TestSeriesListsManyPeriods(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, memstore.New(), "")
	q, err := v.Sequence("inv", sequence.Options{Partition: []any{"shop1"}, Period: sequence.PeriodDay})
	require.NoError(t, err)
	const days = 120
	first := midday(2026, 1, 1)
	for i := range days {
		for range i%3 + 1 {
			_, err := q.NextAt(ctx, first.AddDate(0, 0, i))
			require.NoError(t, err)
		}
	}
	require.NoError(t, q.ClosePeriod(ctx, "2026-01-31"))
	list, err := v.Series(ctx)
	require.NoError(t, err)
	require.Len(t, list, days)
	for i, info := range list {
		label := first.AddDate(0, 0, i).Format("2006-01-02")
		assert.Equal(t, vault.SeriesInfo{
			Name: "inv", Partition: []string{"shop1"}, Period: label, Closed: label == "2026-01-31",
			Head: uint64(i%3 + 1), Definition: sequence.Definition{Period: sequence.PeriodDay},
		}, info)
	}
}
