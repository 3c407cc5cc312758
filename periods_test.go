package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file check periods, closes and stored definitions
// through the vault, on memstore and badger: numbers, ledger entries and
// records together.

// midday is midday UTC of a date, away from every period edge.
func midday(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, time.UTC) }

// exactlyOneToN checks that got holds each of 1..n exactly once.
func exactlyOneToN(t testing.TB, got []uint64, n uint64) {
	t.Helper()
	seen := make(map[uint64]bool, len(got))
	for _, v := range got {
		require.False(t, seen[v], "number %d twice", v)
		require.True(t, v >= 1 && v <= n, "number %d outside 1..%d", v, n)
		seen[v] = true
	}
	require.Len(t, got, int(n), "want each of 1..%d", n)
}

// entriesOfKind returns the vault's ledger entries of kind k.
func entriesOfKind(t testing.TB, v *vault.Vault, k ledger.Kind) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	for e, err := range v.Audit().Read(context.Background(), 0) {
		require.NoError(t, err)
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// 256 callers split over two periods at once: each period is exactly 1..N.
func TestVaultTwoPeriodsAtOnce(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			q, err := v.Sequence("inv", sequence.Options{Period: sequence.PeriodYear, Format: "{seq:04}"})
			require.NoError(t, err)
			const callers = 256
			dates := []time.Time{midday(2025, 12, 31), midday(2026, 1, 1)}
			var (
				wg  sync.WaitGroup
				mu  sync.Mutex
				got [2][]uint64
			)
			for i := range callers {
				wg.Go(func() {
					s, err := q.NextSerialAt(ctx, dates[i%2])
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, fmt.Sprintf("%04d", s.N), s.Formatted)
					assert.Equal(t, fmt.Sprint(2025+i%2), s.Period)
					mu.Lock()
					got[i%2] = append(got[i%2], s.N)
					mu.Unlock()
				})
			}
			wg.Wait()
			exactlyOneToN(t, got[0], callers/2)
			exactlyOneToN(t, got[1], callers/2)

			list, err := v.SeriesNamed(ctx, "inv")
			require.NoError(t, err)
			def := sequence.Definition{Format: "{seq:04}", Period: sequence.PeriodYear}
			assert.Equal(t, []vault.SeriesInfo{
				{Name: "inv", Period: "2025", Head: callers / 2, Format: "{seq:04}", Definition: def},
				{Name: "inv", Period: "2026", Head: callers / 2, Format: "{seq:04}", Definition: def},
			}, list)
			assert.Len(t, entriesOfKind(t, v, ledger.SeriesDefined), 1)
			assert.Len(t, entriesOfKind(t, v, ledger.NumberAllocated), callers)
		})
	}
}

// A closed period refuses every way of taking a number, takes nothing,
// and its head stays; the period next to it keeps going.
func TestVaultClosedPeriodRefuses(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			_, v := openSession(t, st, "")
			q, err := v.Sequence("inv", sequence.Options{Partition: []any{"shop1"}, Period: sequence.PeriodFiscalYear,
				FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}})
			require.NoError(t, err)
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			for i := range 3 {
				_, err := invoices.PutNumbered(ctx, fmt.Sprint("a", i), q.At(midday(2026, 3, 1)), func(s sequence.Serial) (Invoice, error) {
					return Invoice{Number: s.Formatted}, nil
				})
				require.NoError(t, err)
			}
			require.NoError(t, q.ClosePeriod(ctx, "FY2025-26"))
			before := snapshot(t, st)

			old := q.At(midday(2026, 3, 31))
			_, err = q.NextAt(ctx, midday(2025, 4, 1))
			var pe *sequence.PeriodClosedError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, sequence.PeriodClosedError{Series: "inv", Partition: []string{"shop1"}, Period: "FY2025-26"}, *pe)
			_, err = invoices.PutNumbered(ctx, "late", old, func(s sequence.Serial) (Invoice, error) { return Invoice{}, nil })
			assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
			err = v.Update(ctx, func(tx *vault.Tx) error {
				_, err := tx.Next(old)
				return err
			})
			assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
			_, err = old.Claim(ctx, "req-1")
			assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
			assert.Equal(t, before, snapshot(t, st), "a refused call wrote nothing")
			head, err := old.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), head)

			// The next fiscal year keeps going, in its own count.
			s, err := q.NextSerialAt(ctx, midday(2026, 4, 1))
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "1", Period: "FY2026-27"}, s)

			closes := entriesOfKind(t, v, ledger.PeriodClosed)
			require.Len(t, closes, 1)
			assert.Equal(t, []string{"shop1", "FY2025-26"}, closes[0].Partition)
			assert.Equal(t, uint64(3), closes[0].Number)
			list, err := v.SeriesNamed(ctx, "inv")
			require.NoError(t, err)
			require.Len(t, list, 2)
			assert.Equal(t, []any{"FY2025-26", true, uint64(3)}, []any{list[0].Period, list[0].Closed, list[0].Head})
			assert.Equal(t, []any{"FY2026-27", false, uint64(1)}, []any{list[1].Period, list[1].Closed, list[1].Head})

			// The audit of the closed period finds its three records.
			rep, err := old.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, 3, rep.Bound)
			assert.Equal(t, "FY2025-26", rep.Period)
		})
	}
}

// ClosePeriod racing 16 callers into its period: every number returned is
// at most the head the close recorded, each of 1..head was returned, and
// afterwards nothing is taken.
func TestVaultClosePeriodRacingNextAt(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			q, err := v.Sequence("inv", sequence.Options{Period: sequence.PeriodMonth})
			require.NoError(t, err)
			const callers, before = 16, 32
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				got     []uint64
				taken   = make(chan struct{}, before)
				closing = make(chan struct{})
			)
			for range callers {
				wg.Go(func() {
					for {
						select {
						case <-closing: // after the close: refused, and the caller is done
							_, err := q.NextAt(ctx, midday(2026, 2, 10))
							assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
							return
						default:
						}
						n, err := q.NextAt(ctx, midday(2026, 2, 10))
						if errors.Is(err, sequence.ErrPeriodClosed) {
							return
						}
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						got = append(got, n)
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
			close(closing)
			wg.Wait()

			closes := entriesOfKind(t, v, ledger.PeriodClosed)
			require.Len(t, closes, 1)
			head := closes[0].Number
			exactlyOneToN(t, got, head)
			_, err = q.NextAt(ctx, midday(2026, 2, 28))
			require.ErrorIs(t, err, sequence.ErrPeriodClosed)
			after, closed, err := q.PeekPeriod(ctx, "2026-02")
			require.NoError(t, err)
			assert.True(t, closed)
			assert.Equal(t, head, after)
			assert.Len(t, entriesOfKind(t, v, ledger.NumberAllocated), int(head))
		})
	}
}

// A definition is stored with the series: another session opening it
// with no options numbers and renders the same; one opening it with
// another definition is refused and takes nothing.
func TestVaultDefinitionAcrossSessions(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			rome, err := time.LoadLocation("Europe/Rome")
			require.NoError(t, err)
			_, v1 := openSession(t, st, "")
			q1, err := v1.Sequence("inv", sequence.Options{Format: "R-{seq:05}", Period: sequence.PeriodYear, Location: rome,
				Meta: map[string]string{"code": "PT-A1"}})
			require.NoError(t, err)
			// 23:30 UTC on 31 December is 2026 in Rome.
			s, err := q1.NextSerialAt(ctx, time.Date(2025, 12, 31, 23, 30, 0, 0, time.UTC))
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "R-00001", Period: "2026"}, s)

			_, v2 := openSession(t, st, "")
			q2 := mustSeq(t, v2, "inv")
			s, err = q2.NextSerialAt(ctx, time.Date(2025, 12, 31, 23, 45, 0, 0, time.UTC))
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 2, Formatted: "R-00002", Period: "2026"}, s)

			before := snapshot(t, st)
			for _, o := range []sequence.Options{
				{Format: "R-{seq:05}", Period: sequence.PeriodYear}, // no zone: UTC
				{Format: "{seq}"},
				{Format: "R-{seq:05}", Period: sequence.PeriodYear, Location: rome},
			} {
				q, err := v2.Sequence("inv", o)
				require.NoError(t, err)
				_, err = q.NextAt(ctx, midday(2026, 5, 1))
				require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
				err = v2.Update(ctx, func(tx *vault.Tx) error {
					_, err := tx.Next(q)
					return err
				})
				require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
			}
			assert.Equal(t, before, snapshot(t, st), "a refused handle wrote nothing")
			def, err := q2.Definition(ctx)
			require.NoError(t, err)
			assert.Equal(t, "Europe/Rome", def.Zone)
			assert.Len(t, entriesOfKind(t, v2, ledger.SeriesDefined), 1)
		})
	}
}

// Back-dating into an earlier period still open, after later numbers
// exist, through every way of taking a number; the records carry the
// numbers of their own period.
func TestVaultBackDating(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			q, err := v.Sequence("inv", sequence.Options{Period: sequence.PeriodFiscalYear,
				FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}, Format: "FY/{seq:04}"})
			require.NoError(t, err)
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			put := func(id string, date time.Time) sequence.Serial {
				var got sequence.Serial
				_, err := invoices.PutNumbered(ctx, id, q.At(date), func(s sequence.Serial) (Invoice, error) {
					got = s
					return Invoice{Number: s.Formatted}, nil
				})
				require.NoError(t, err)
				return got
			}
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "FY/0001", Period: "FY2026-27"}, put("apr-1", midday(2026, 4, 1)))
			assert.Equal(t, sequence.Serial{N: 2, Formatted: "FY/0002", Period: "FY2026-27"}, put("apr-2", midday(2026, 4, 2)))
			// Back-dated to 31 March: the old fiscal year, still open.
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "FY/0001", Period: "FY2025-26"}, put("mar-31", midday(2026, 3, 31)))

			var s sequence.Serial
			require.NoError(t, v.Update(ctx, func(tx *vault.Tx) error {
				s, err = tx.Next(q.At(midday(2026, 3, 30)))
				return err
			}))
			assert.Equal(t, sequence.Serial{N: 2, Formatted: "FY/0002", Period: "FY2025-26"}, s)
			n, err := q.NextAt(ctx, midday(2026, 5, 1))
			require.NoError(t, err)
			assert.Equal(t, uint64(3), n)

			// PutNumbered is idempotent per record and period.
			assert.Equal(t, sequence.Serial{}, put("mar-31", midday(2026, 3, 31)), "build not called again")
			rep, err := q.At(midday(2026, 1, 1)).Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), rep.Head)
			assert.Equal(t, 1, rep.Bound)
			assert.Equal(t, 1, rep.Unbound)
			got, err := invoices.Get(ctx, "mar-31")
			require.NoError(t, err)
			assert.Equal(t, "FY/0001", got.Number)
		})
	}
}

// A series without a definition stores none and numbers as before.
func TestVaultSeriesWithoutDefinition(t *testing.T) {
	ctx := context.Background()
	st := memAndBadger()["memstore"](t)
	_, v := openSession(t, st, "")
	nextN(t, mustSeq(t, v, "plain"), 3)
	assert.Empty(t, entriesOfKind(t, v, ledger.SeriesDefined))
	list, err := v.Series(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.SeriesInfo{{Name: "plain", Head: 3}}, list)
	var _ stores.Store = st
}

// The date, fiscal and meta tokens render from the document date read in
// the series' zone, through the vault, on a handle that defined the series
// and on one opened later without options; PutNumbered stores the same text.
func TestVaultDateTokens(t *testing.T) {
	ctx := context.Background()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	st := memstore.New()
	_, v1 := openSession(t, st, "")
	q, err := v1.Sequence("inv", sequence.Options{Format: "{meta.code}/FY{FY}/{seq:04} {DD}.{MM}.{YYYY}",
		Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location: rome, Meta: map[string]string{"code": "AT7"}})
	require.NoError(t, err)
	s, err := q.NextSerialAt(ctx, time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, sequence.Serial{N: 1, Formatted: "AT7/FY2026-27/0001 14.05.2026", Period: "FY2026-27"}, s)
	// 22:30 UTC on 31 March is 1 April in Rome (summer time): the new year.
	s, err = q.NextSerialAt(ctx, time.Date(2026, 3, 31, 22, 30, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, sequence.Serial{N: 2, Formatted: "AT7/FY2026-27/0002 01.04.2026", Period: "FY2026-27"}, s)
	// An hour earlier it is still 31 March there: the old year, from 1.
	s, err = q.NextSerialAt(ctx, time.Date(2026, 3, 31, 21, 30, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, sequence.Serial{N: 1, Formatted: "AT7/FY2025-26/0001 31.03.2026", Period: "FY2025-26"}, s)

	_, v2 := openSession(t, st, "")
	q2 := mustSeq(t, v2, "inv")
	invoices := vault.CollectionOf[Invoice](v2, "invoices")
	inv, err := invoices.PutNumbered(ctx, "a", q2.At(time.Date(2026, 6, 1, 9, 0, 0, 0, rome)), func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "AT7/FY2026-27/0003 01.06.2026", inv.Number)
	// Format has no context to read the definition with: a handle renders
	// with it once a call has read it.
	_, err = q2.Definition(ctx)
	require.NoError(t, err)
	assert.Equal(t, "AT7/FY2026-27/0003 01.06.2026", q2.At(time.Date(2026, 6, 1, 9, 0, 0, 0, rome)).Format(3))
}
