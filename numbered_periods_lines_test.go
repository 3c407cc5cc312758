package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/vault"
)

// A handle numbering by the record's date shows each period's line of
// records (Periods), and SeriesOf gives the line a record joins: its
// date's period, whose pass then numbers a record enqueued there. A record
// that does not exist, or has no date, is refused with its own error and
// lists no period.
func TestNumberingOfDatedLinesOfRecords(t *testing.T) {
	for name, newStore := range passStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			dec := time.Date(2026, time.December, 31, 23, 30, 0, 0, loc)
			_, err := h.Put(ctx, "a", Till{Date: dec})
			require.NoError(t, err)
			plain := vault.CollectionOf[Till](v, "tills")
			require.NoError(t, plain.Put(ctx, "jan", Till{Date: time.Date(2027, time.January, 2, 9, 0, 0, 0, loc)}))
			require.NoError(t, plain.Put(ctx, "undated", Till{}))

			_, err = h.SeriesOf(ctx, "nobody")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			_, err = h.SeriesOf(ctx, "undated")
			assert.ErrorIs(t, err, vault.ErrInvalidArgument)
			periods, err := h.Periods(ctx)
			require.NoError(t, err)
			require.Len(t, periods, 1, "refusals list no period")
			assert.Equal(t, "2026-12", periods[0].Period)

			s, err := h.SeriesOf(ctx, "jan")
			require.NoError(t, err)
			_, err = s.Enqueue(ctx, "jan")
			require.NoError(t, err)
			periods, err = h.Periods(ctx)
			require.NoError(t, err)
			require.Len(t, periods, 2)
			assert.Equal(t, "2027-01", periods[1].Period)
			st, err := periods[1].Series.Status(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, st.Waiting)

			rep, err := h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, rep.Assigned)
			g, err := h.Get(ctx, "jan")
			require.NoError(t, err)
			assert.Equal(t, "T202701-001", g.Value.No)
		})
	}
}
