package sequence_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// The tests of this file check stored series definitions, periods chosen
// by the document's date, and closed periods, on both allocation paths.

// day is midday UTC of a date, away from every period edge.
func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, time.UTC) }

// twoServices returns two services over one store with one sealer: two
// processes sharing a vault.
func twoServices(t *testing.T, st stores.Store, cfg sequence.Config) (*sequence.Service, *sequence.Service) {
	t.Helper()
	t.Cleanup(func() { _ = st.Close() })
	sealer := newSealer()
	return sequence.NewService(st, sealer, "v/", cfg), sequence.NewService(st, sealer, "v/", cfg)
}

func TestNextAtCountsEachPeriodFromOne(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodYear, Format: "{seq:03}"})

			for _, c := range []struct {
				date time.Time
				want sequence.Serial
			}{
				{day(2025, 12, 30), sequence.Serial{N: 1, Formatted: "001", Period: "2025"}},
				{day(2026, 1, 2), sequence.Serial{N: 1, Formatted: "001", Period: "2026"}},
				{day(2026, 1, 3), sequence.Serial{N: 2, Formatted: "002", Period: "2026"}},
				// Back-dated into the earlier period, still open.
				{day(2025, 12, 31), sequence.Serial{N: 2, Formatted: "002", Period: "2025"}},
			} {
				s, err := q.NextSerialAt(ctx, c.date)
				require.NoError(t, err)
				assert.Equal(t, c.want, s, "dated %v", c.date)
			}
			n, err := q.At(day(2026, 6, 1)).Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), n)
			n, err = q.At(day(2025, 1, 1)).Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n)
			first, err := q.At(day(2024, 5, 5)).NextN(ctx, 3)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), first)
			head, closed, err := q.PeekPeriod(ctx, "2024")
			require.NoError(t, err)
			assert.Equal(t, uint64(3), head)
			assert.False(t, closed)
		})
	}
}

func TestPeriodInTheSeriesZone(t *testing.T) {
	ctx := context.Background()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	svc := newService(t, newMem(), sequence.Config{})
	q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodYear, Location: rome})
	// 23:30 UTC on 31 December 2025 is 2026 in Rome.
	s, err := q.NextSerialAt(ctx, time.Date(2025, 12, 31, 23, 30, 0, 0, time.UTC))
	require.NoError(t, err)
	assert.Equal(t, "2026", s.Period)
}

func TestPeriodOnAPartitionedSeries(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			st := kind.new(newMem(), faultstore.Options{})
			svc := newService(t, st, sequence.Config{})
			opts := sequence.Options{Partition: []any{"shop1"}, Period: sequence.PeriodYear, Format: "{partition.0}/{seq}"}
			shop1 := mustSequence(t, svc, "inv", opts)
			opts.Partition = []any{"shop2"}
			shop2 := mustSequence(t, svc, "inv", opts)

			for i := range 3 {
				s, err := shop1.NextSerialAt(ctx, day(2026, 3, 1))
				require.NoError(t, err)
				assert.Equal(t, sequence.Serial{N: uint64(i + 1), Formatted: "shop1/" + string(rune('1'+i)), Period: "2026"}, s)
			}
			s, err := shop2.NextSerialAt(ctx, day(2026, 3, 1))
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "shop2/1", Period: "2026"}, s)
			assert.Equal(t, []string{"shop1"}, shop1.Partition())

			// Each period is a counter of its own, under the partition
			// followed by the period's label.
			var counters []string
			for k := range listing(t, st) {
				if strings.HasPrefix(k, "v/_sequences/") && !strings.Contains(k, "\x01") {
					counters = append(counters, k)
				}
			}
			assert.ElementsMatch(t, []string{"v/_sequences/inv\x00shop1/2026", "v/_sequences/inv\x00shop2/2026"}, counters)
		})
	}
}

func TestDefinitionStoredAndAdopted(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			j := &journal{}
			st := kind.new(newMem(), faultstore.Options{})
			a, b := twoServices(t, st, sequence.Config{Journal: j})
			apr := sequence.MonthDay{Month: time.April, Day: 1}
			defined := mustSequence(t, a, "inv", sequence.Options{
				Format: "R-{seq:05}", Period: sequence.PeriodFiscalYear, FiscalStart: apr,
				Meta: map[string]string{"code": "X1"},
			})
			s, err := defined.NextSerialAt(ctx, day(2026, 3, 31))
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "R-00001", Period: "FY2025-26"}, s)

			// Another process opens the series with no options: same
			// format, same periods.
			plain := mustSequence(t, b, "inv")
			s, err = plain.NextSerialAt(ctx, day(2026, 3, 1))
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 2, Formatted: "R-00002", Period: "FY2025-26"}, s)
			s, err = plain.NextSerialAt(ctx, day(2026, 4, 1))
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "R-00001", Period: "FY2026-27"}, s)
			d, err := plain.Definition(ctx)
			require.NoError(t, err)
			assert.Equal(t, sequence.Definition{
				Format: "R-{seq:05}", Period: sequence.PeriodFiscalYear, FiscalStart: apr, Meta: map[string]string{"code": "X1"},
			}, d)
			assert.Equal(t, "R-00007", plain.Format(7))

			// The definition was recorded once, with the first number.
			var kinds []string
			if kind.name == "tx" {
				for _, k := range journalKeys(t, st) {
					kinds = append(kinds, strings.Split(k, "/")[3])
				}
			} else {
				for _, e := range j.events {
					kinds = append(kinds, e.Kind.String())
				}
			}
			assert.Equal(t, 1, countOf(kinds, "defined"), "%v", kinds)
			assert.Equal(t, 3, countOf(kinds, "allocated"), "%v", kinds)
		})
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func TestDefinitionMismatchTakesNothing(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			st := kind.new(newMem(), faultstore.Options{})
			a, b := twoServices(t, st, sequence.Config{})
			_, err := mustSequence(t, a, "inv", sequence.Options{Format: "A-{seq}"}).Next(ctx)
			require.NoError(t, err)
			before := listing(t, st)

			for _, o := range []sequence.Options{
				{Format: "B-{seq}"},
				{Format: "A-{seq}", Period: sequence.PeriodYear},
				{Format: "A-{seq}", Meta: map[string]string{"k": "v"}},
			} {
				for _, svc := range []*sequence.Service{a, b} {
					q := mustSequence(t, svc, "inv", o)
					_, err := q.Next(ctx)
					require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
					var de *sequence.DefinitionError
					require.ErrorAs(t, err, &de)
					assert.Equal(t, "A-{seq}", de.Stored.Format)
					_, err = q.NextSerialAt(ctx, day(2026, 1, 1))
					assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
					_, err = q.Peek(ctx)
					assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
				}
			}
			assert.Equal(t, before, listing(t, st), "a refused handle wrote nothing")
			n, err := mustSequence(t, b, "inv").Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
		})
	}
}

// Two processes define one series differently at once: one definition is
// stored, and the other's calls fail without taking a number.
func TestDefinitionRaceOneWins(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	a, b := twoServices(t, st, sequence.Config{Journal: &journal{}})
	qa := mustSequence(t, a, "inv", sequence.Options{Format: "A-{seq}"})
	qb := mustSequence(t, b, "inv", sequence.Options{Format: "B-{seq}"})
	var wg sync.WaitGroup
	var errA, errB error
	var sa, sb sequence.Serial
	wg.Go(func() { sa, errA = qa.NextSerial(ctx) })
	wg.Go(func() { sb, errB = qb.NextSerial(ctx) })
	wg.Wait()
	require.True(t, (errA == nil) != (errB == nil), "exactly one wins: %v / %v", errA, errB)
	if errA != nil {
		assert.ErrorIs(t, errA, sequence.ErrDefinitionMismatch)
		assert.Equal(t, sequence.Serial{N: 1, Formatted: "B-1"}, sb)
	} else {
		assert.ErrorIs(t, errB, sequence.ErrDefinitionMismatch)
		assert.Equal(t, sequence.Serial{N: 1, Formatted: "A-1"}, sa)
	}
	n, err := qa.Peek(ctx)
	if errA != nil {
		require.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
		n, err = qb.Peek(ctx)
	}
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n)

	// In the losing process, a handle without options numbers as the
	// winner's definition says.
	loser, winner := a, "B-2"
	if errB != nil {
		loser, winner = b, "A-2"
	}
	s, err := mustSequence(t, loser, "inv").NextSerial(ctx)
	require.NoError(t, err)
	assert.Equal(t, winner, s.Formatted)
}

func TestNoDefinitionNoRecord(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	svc := newService(t, st, sequence.Config{})
	q := mustSequence(t, svc, "plain")
	_, err := q.Next(ctx)
	require.NoError(t, err)
	for k := range listing(t, st) {
		assert.NotContains(t, k, "\x01d", "a series without a definition stores none")
	}
	d, err := q.Definition(ctx)
	require.NoError(t, err)
	assert.True(t, d.IsZero())
}

func TestClosePeriod(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			j := &journal{}
			st := kind.new(newMem(), faultstore.Options{})
			svc := newService(t, st, sequence.Config{Journal: j})
			q := mustSequence(t, svc, "inv", sequence.Options{Partition: []any{"shop1"}, Period: sequence.PeriodYear})
			for range 3 {
				_, err := q.NextAt(ctx, day(2025, 6, 1))
				require.NoError(t, err)
			}
			require.NoError(t, q.ClosePeriod(ctx, "2025"))

			_, err := q.NextAt(ctx, day(2025, 12, 31))
			require.ErrorIs(t, err, sequence.ErrPeriodClosed)
			var pe *sequence.PeriodClosedError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, sequence.PeriodClosedError{Series: "inv", Partition: []string{"shop1"}, Period: "2025"}, *pe)
			for _, call := range []func() error{
				func() error { _, err := q.At(day(2025, 1, 1)).NextSerial(ctx); return err },
				func() error { _, err := q.At(day(2025, 1, 1)).NextN(ctx, 2); return err },
				func() error { return q.At(day(2025, 1, 1)).SeedTo(ctx, 10) },
			} {
				assert.ErrorIs(t, call(), sequence.ErrPeriodClosed)
			}
			if kind.name == "tx" {
				_, err := q.At(day(2025, 1, 1)).Claim(ctx, "req-1")
				assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
				_, err = q.At(day(2025, 1, 1)).Bind(ctx, func(stores.Tx, sequence.Serial) error { return nil })
				assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
			}
			head, closed, err := q.PeekPeriod(ctx, "2025")
			require.NoError(t, err)
			assert.Equal(t, uint64(3), head, "a closed period's head does not move")
			assert.True(t, closed)

			// The next period keeps going.
			n, err := q.NextAt(ctx, day(2026, 1, 1))
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)

			// Closing again is a no-op; closing a period without numbers works.
			require.NoError(t, q.ClosePeriod(ctx, "2025"))
			require.NoError(t, q.ClosePeriod(ctx, "2024"))
			head, closed, err = q.PeekPeriod(ctx, "2024")
			require.NoError(t, err)
			assert.Equal(t, uint64(0), head)
			assert.True(t, closed)
			_, err = q.NextAt(ctx, day(2024, 2, 29))
			assert.ErrorIs(t, err, sequence.ErrPeriodClosed)

			// The ledger was told each close once, with the period's head.
			var closes []string
			if kind.name == "tx" {
				for _, k := range journalKeys(t, st) {
					if strings.Contains(k, "/closed/") {
						closes = append(closes, k)
					}
				}
			} else {
				for _, e := range j.events {
					if e.Kind.String() == "closed" {
						closes = append(closes, "journal/"+e.Series+"/"+strings.Join(e.Partition, ",")+"/closed/"+string(rune('0'+e.Number)))
					}
				}
			}
			assert.ElementsMatch(t, []string{"journal/inv/shop1,2024/closed/0", "journal/inv/shop1,2025/closed/3"}, closes)
		})
	}
}

// A close racing 16 callers into its period: every number returned is at
// most the head at the close, each number up to it was returned exactly
// once, and afterwards nothing is taken.
func TestClosePeriodRacingNextAt(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodMonth})
			const callers, before = 16, 50
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				got     []uint64
				taken   = make(chan struct{}, before)
				closing = make(chan struct{}) // a receipt per number, up to before
			)
			for range callers {
				wg.Go(func() {
					for {
						select {
						case <-closing: // after the close: refused, and the caller is done
							_, err := q.NextAt(ctx, day(2026, 2, 10))
							assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
							return
						default:
						}
						n, err := q.NextAt(ctx, day(2026, 2, 10))
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
			for range before { // the close races callers in full flight
				<-taken
			}
			require.NoError(t, q.ClosePeriod(ctx, "2026-02"))
			close(closing)
			wg.Wait()
			head, closed, err := q.PeekPeriod(ctx, "2026-02")
			require.NoError(t, err)
			require.True(t, closed)
			requireExactly(t, got, int(head))
			_, err = q.NextAt(ctx, day(2026, 2, 28))
			require.ErrorIs(t, err, sequence.ErrPeriodClosed)
			after, _, err := q.PeekPeriod(ctx, "2026-02")
			require.NoError(t, err)
			assert.Equal(t, head, after)
		})
	}
}

// 256 callers split over two periods at once: each period gets exactly
// 1..N.
func TestTwoPeriodsAtOnce(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{Journal: &journal{}})
			q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodYear})
			const callers, each = 256, 4
			dates := []time.Time{day(2025, 7, 1), day(2026, 7, 1)}
			var (
				wg  sync.WaitGroup
				mu  sync.Mutex
				got = [2][]uint64{}
			)
			for i := range callers {
				wg.Go(func() {
					for range each {
						n, err := q.NextAt(ctx, dates[i%2])
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						got[i%2] = append(got[i%2], n)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			for i, label := range []string{"2025", "2026"} {
				requireExactly(t, got[i], callers/2*each)
				head, _, err := q.PeekPeriod(ctx, label)
				require.NoError(t, err)
				assert.Equal(t, uint64(callers/2*each), head)
			}
		})
	}
}

// Bad input gets a *ValidationError and changes nothing.
func TestPeriodBadInput(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	svc := newService(t, st, sequence.Config{})
	for name, o := range map[string]sequence.Options{
		"zone not IANA":      {Location: time.FixedZone("Mars/Olympus", 3600)},
		"local zone":         {Location: time.Local},
		"fiscal start 02-29": {Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.February, Day: 29}},
		"fiscal month 13":    {FiscalStart: sequence.MonthDay{Month: 13, Day: 1}},
		"unknown period":     {Period: sequence.Period(9)},
		"meta key":           {Meta: map[string]string{"a b": "x"}},
		"meta value":         {Meta: map[string]string{"k": "x\ny"}},
		"corrects":           {Corrects: "bad\x00name"},
	} {
		_, err := svc.Sequence("inv", o)
		var ve *sequence.ValidationError
		assert.ErrorAs(t, err, &ve, name)
		assert.ErrorIs(t, err, sequence.ErrInvalid, name)
	}
	for _, c := range []struct {
		p      sequence.Period
		start  sequence.MonthDay
		labels []string
	}{
		{sequence.PeriodYear, sequence.MonthDay{}, []string{"", "2026-03", "FY2026", "26", "02026", "+202"}},
		{sequence.PeriodMonth, sequence.MonthDay{}, []string{"2026", "2026-13", "2026-3", "2026-03-01"}},
		{sequence.PeriodDay, sequence.MonthDay{}, []string{"2026-02-30", "2026-2-3", "2026-03"}},
		{sequence.PeriodFiscalYear, sequence.MonthDay{Month: time.April, Day: 1}, []string{"FY2026", "FY2026-28", "2026", "FY26-27", "fy2026-27"}},
		{sequence.PeriodFiscalYear, sequence.MonthDay{}, []string{"FY2026-27", "FY202"}},
	} {
		q := mustSequence(t, svc, "s-"+c.p.String()+"-"+c.start.String(), sequence.Options{Period: c.p, FiscalStart: c.start})
		for _, l := range c.labels {
			err := q.ClosePeriod(ctx, l)
			var ve *sequence.ValidationError
			assert.ErrorAs(t, err, &ve, "%v label %q", c.p, l)
			_, _, err = q.PeekPeriod(ctx, l)
			assert.ErrorAs(t, err, &ve, "%v label %q", c.p, l)
		}
	}
	plain := mustSequence(t, svc, "plain")
	var ve *sequence.ValidationError
	assert.ErrorAs(t, plain.ClosePeriod(ctx, "2026"), &ve, "a series without periods")
	assert.Empty(t, listing(t, st), "nothing was written")
}
