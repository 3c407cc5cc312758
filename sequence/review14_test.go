package sequence_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
)

// A Claim retried after its period was closed gets the number it took
// before the close (that number was taken while the period was open), and
// a new request id is refused: the close takes nothing from a caller that
// does not know whether its first call succeeded.
func TestClaimRetriedAcrossAClose(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodYear})
			at := q.At(day(2025, 6, 1))
			id, other := sequence.NewRequestID(), sequence.NewRequestID()
			_, err := at.Next(ctx)
			require.NoError(t, err)
			n, err := at.Claim(ctx, id)
			require.NoError(t, err)
			require.Equal(t, uint64(2), n)
			require.NoError(t, q.ClosePeriod(ctx, "2025"))

			again, err := at.Claim(ctx, id)
			require.NoError(t, err, "a retry of a claim served before the close")
			assert.Equal(t, n, again)
			_, err = at.Claim(ctx, other)
			assert.ErrorIs(t, err, sequence.ErrPeriodClosed, "a new request")
			head, closed, err := q.PeekPeriod(ctx, "2025")
			require.NoError(t, err)
			assert.Equal(t, uint64(2), head)
			assert.True(t, closed)
		})
	}
}

// A number dated at the edges of time.Time's years is either refused as
// bad input (ErrInvalid, nothing taken) or taken into a period that
// ClosePeriod and PeekPeriod can name: never into a period that can
// never be closed.
func TestPeriodLabelsAtTheYearEdges(t *testing.T) {
	ctx := context.Background()
	dates := []time.Time{
		time.Date(0, time.January, 1, 12, 0, 0, 0, time.UTC),
		time.Date(-1, time.June, 1, 12, 0, 0, 0, time.UTC),
		time.Date(9999, time.December, 31, 12, 0, 0, 0, time.UTC),
		time.Date(10000, time.January, 1, 12, 0, 0, 0, time.UTC),
		time.Date(123456, time.March, 3, 12, 0, 0, 0, time.UTC),
	}
	for _, o := range []sequence.Options{
		{Period: sequence.PeriodDay}, {Period: sequence.PeriodMonth}, {Period: sequence.PeriodYear},
		{Period: sequence.PeriodFiscalYear}, {Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}},
	} {
		for _, d := range dates {
			st := newMem()
			svc := newService(t, st, sequence.Config{})
			q := mustSequence(t, svc, "inv", o)
			s, err := q.NextSerialAt(ctx, d)
			if err != nil {
				assert.ErrorIs(t, err, sequence.ErrInvalid, "%v %v", o.Period, d)
				assert.Empty(t, listing(t, st), "%v %v: nothing written", o.Period, d)
				continue
			}
			head, closed, err := q.PeekPeriod(ctx, s.Period)
			if assert.NoError(t, err, "%v %v: peek period %q", o.Period, d, s.Period) {
				assert.Equal(t, uint64(1), head)
				assert.False(t, closed)
			}
			assert.NoError(t, q.ClosePeriod(ctx, s.Period), "%v %v: close period %q", o.Period, d, s.Period)
			_, err = q.NextAt(ctx, d)
			assert.ErrorIs(t, err, sequence.ErrPeriodClosed, "%v %v", o.Period, d)
		}
	}
}

// Claims racing a close, each retried once after it: a claim served before
// the close gets the same number on its retry, one refused before is
// refused again (never a new number), and the numbers are exactly
// 1..head.
func TestClaimsRacingAClose(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodMonth})
			at := q.At(day(2026, 2, 10))
			const callers, each = 16, 20
			type result struct {
				id  string
				n   uint64
				err error
			}
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				results []result
				started = make(chan struct{}, callers)
			)
			for range callers {
				wg.Go(func() {
					for i := range each {
						id := sequence.NewRequestID()
						n, err := at.Claim(ctx, id)
						mu.Lock()
						results = append(results, result{id, n, err})
						mu.Unlock()
						if i == 2 {
							started <- struct{}{}
						}
					}
				})
			}
			for range callers {
				<-started
			}
			require.NoError(t, q.ClosePeriod(ctx, "2026-02"))
			wg.Wait()
			head, closed, err := q.PeekPeriod(ctx, "2026-02")
			require.NoError(t, err)
			require.True(t, closed)
			var got []uint64
			for _, r := range results {
				again, err := at.Claim(ctx, r.id)
				if r.err != nil {
					require.ErrorIs(t, r.err, sequence.ErrPeriodClosed)
					assert.ErrorIs(t, err, sequence.ErrPeriodClosed, "a claim refused by the close")
					continue
				}
				got = append(got, r.n)
				if assert.NoError(t, err, "the retry of a claim served before the close") {
					assert.Equal(t, r.n, again)
				}
			}
			requireExactly(t, got, int(head))
			after, _, err := q.PeekPeriod(ctx, "2026-02")
			require.NoError(t, err)
			assert.Equal(t, head, after)
		})
	}
}

// The period of a document date is read in the series' zone, whatever the
// date's own location, its monotonic clock reading, or a zone's odd
// offset (+05:45, +12:45/+13:45).
func TestPeriodOfDatesInOtherZones(t *testing.T) {
	ctx := context.Background()
	load := func(name string) *time.Location {
		l, err := time.LoadLocation(name)
		require.NoError(t, err)
		return l
	}
	ny, kathmandu, chatham := load("America/New_York"), load("Asia/Kathmandu"), load("Pacific/Chatham")
	for _, c := range []struct {
		zone *time.Location
		date time.Time
		want string
	}{
		// 20:00 on 31 December in New York is 01:00 on 1 January UTC.
		{nil, time.Date(2025, 12, 31, 20, 0, 0, 0, ny), "2026"},
		{ny, time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC), "2025"},
		// Midnight in Kathmandu is 18:15 UTC the day before.
		{kathmandu, time.Date(2025, 12, 31, 18, 15, 0, 0, time.UTC), "2026"},
		{kathmandu, time.Date(2025, 12, 31, 18, 14, 59, 999_999_999, time.UTC), "2025"},
		// Midnight in Chatham (summer, +13:45) is 10:15 UTC the day before.
		{chatham, time.Date(2025, 12, 31, 10, 15, 0, 0, time.UTC), "2026"},
		{chatham, time.Date(2025, 12, 31, 10, 14, 0, 0, time.UTC), "2025"},
	} {
		svc := newService(t, newMem(), sequence.Config{})
		q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodYear, Location: c.zone})
		s, err := q.NextSerialAt(ctx, c.date)
		require.NoError(t, err)
		assert.Equal(t, c.want, s.Period, "%v in %v", c.date, c.zone)
	}
	// A reading of the monotonic clock changes nothing.
	svc := newService(t, newMem(), sequence.Config{})
	q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodDay, Location: kathmandu})
	now := time.Now()
	a, err := q.NextSerialAt(ctx, now)
	require.NoError(t, err)
	b, err := q.NextSerialAt(ctx, now.Round(0))
	require.NoError(t, err)
	assert.Equal(t, a.Period, b.Period)
	assert.Equal(t, uint64(2), b.N)
}

// A zero document date does not take a number into the period of year 1
// while rendering today's date: it is refused as bad input, or it means
// now for both.
func TestZeroDocumentDate(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	svc := newService(t, st, sequence.Config{})
	q := mustSequence(t, svc, "inv", sequence.Options{Period: sequence.PeriodYear, Format: "{YYYY}/{seq}"})
	s, err := q.NextSerialAt(ctx, time.Time{})
	if err != nil {
		assert.ErrorIs(t, err, sequence.ErrInvalid)
		assert.Empty(t, listing(t, st), "nothing written")
		return
	}
	assert.Equal(t, s.Period+"/1", s.Formatted, "the period and the rendered year agree")
}
