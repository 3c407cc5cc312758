package noydb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// The first handoff of a series numbered by the record's date stores its
// definition (period, zone, format) on every store where passes number, a
// file store included: a later handle asking for another period is
// refused (ErrDefinitionMismatch, nothing written), one asking for none
// reads it, and the series lists it. (Before, a file store kept no
// definition: a handle opened with a year numbered the same series by
// year beside the months.)
func TestNumberingOfDatedStoresItsDefinitionWherePassesNumber(t *testing.T) {
	for name, newStore := range passStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			_, v := openSession(t, st, "")
			loc := rome(t)
			dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
			_, err := monthly(t, v, loc).Put(ctx, "a", Till{Date: dec})
			require.NoError(t, err)

			_, v2 := openSession(t, st, "")
			infos, err := v2.SeriesNamed(ctx, "tills")
			require.NoError(t, err)
			var def sequence.Definition
			for _, s := range infos {
				if !s.Definition.IsZero() {
					def = s.Definition
				}
			}
			assert.Equal(t, sequence.PeriodMonth, def.Period, "%+v", infos)
			assert.Equal(t, "Europe/Rome", def.Zone)
			assert.Equal(t, "T{YYYY}{MM}-{seq:03}", def.Format)

			yearly, err := vault.NumberingOfDated(vault.CollectionOf[Till](v2, "tills"), "tills",
				sequence.Options{Period: sequence.PeriodYear, Location: loc}, setTill, tillDate)
			require.NoError(t, err)
			_, err = yearly.Put(ctx, "b", Till{Date: dec})
			assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
			_, err = vault.CollectionOf[Till](v2, "tills").Get(ctx, "b")
			assert.ErrorIs(t, err, vault.ErrNotFound, "nothing written")

			q, err := v2.Sequence("tills", sequence.Options{})
			require.NoError(t, err)
			got, err := q.Definition(ctx)
			require.NoError(t, err)
			assert.Equal(t, sequence.PeriodMonth, got.Period)
		})
	}
}

// The listing of a series numbered by the record's date has one head per
// period, for both paths: its counter's and its passes', one entry with
// Passes set; the series' own deferred series, which numbers nothing, is
// not listed. (Before, the periods showed as counters only and the series
// once more as a pass series at 0.)
func TestSeriesListsOneHeadPerPeriodOfADatedSeries(t *testing.T) {
	for name, newStore := range passStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
			for i, d := range []time.Time{dec, dec, dec.AddDate(0, 0, 2)} {
				_, err := h.Put(ctx, fmt.Sprint("r", i), Till{Date: d})
				require.NoError(t, err)
			}
			_, err := h.Settle(ctx)
			require.NoError(t, err)
			_, err = h.Put(ctx, "late", Till{Date: time.Date(2026, time.November, 30, 12, 0, 0, 0, loc)}) // waiting
			require.NoError(t, err)

			for _, list := range []func() ([]vault.SeriesInfo, error){
				func() ([]vault.SeriesInfo, error) { return v.Series(ctx) },
				func() ([]vault.SeriesInfo, error) { return v.SeriesNamed(ctx, "tills") },
			} {
				infos, err := list()
				require.NoError(t, err)
				var got []string
				for _, s := range infos {
					got = append(got, fmt.Sprintf("%s %q %d passes=%v %s", s.Name, s.Period, s.Head, s.Passes, s.Collection))
				}
				assert.ElementsMatch(t, []string{
					`tills "2026-11" 0 passes=true tills`,
					`tills "2026-12" 2 passes=true tills`,
					`tills "2027-01" 1 passes=true tills`,
				}, got)
			}
		})
	}
}
