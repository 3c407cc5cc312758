package numbering_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestStatusOfInterruptedPass stops passes after each of their store
// operations in turn, then checks that Status says exactly how far each got:
// every record is either numbered (Last) or waiting; the records stamped
// are Last minus the batch's unstamped ones; and the next pass gives the
// unstamped ones numbers of the batch above Done and the waiting ones the
// numbers after Last.
func TestStatusOfInterruptedPass(t *testing.T) {
	ctx := context.Background()
	var cut passCutter
	count := cut.hook
	for _, hide := range []bool{true, false} {
		t.Run(fmt.Sprintf("transactions=%v", !hide), func(t *testing.T) {
			st := faultstore.New(memstore.New(), faultstore.Options{HideTransactor: hide, Before: count})
			d := openDevice(t, "till", st, receiptOpts)
			numbering.Tune(d.series, 3, 4)
			var ids []string
			stopped := 0
			for k := int64(1); ; k++ {
				for i := range 7 {
					id := fmt.Sprintf("r-%03d-%d", k, i)
					d.write(t, id, i)
					ids = append(ids, id)
				}
				_, err := cut.pass(ctx, d.series, k)
				if err == nil {
					break // k is past the end of a whole pass
				}
				require.ErrorIs(t, err, context.Canceled)
				stopped++

				s, err := d.series.Status(ctx)
				require.NoError(t, err)
				stamped := map[string]uint64{}
				for _, id := range ids {
					if n := numberOf(t, d, id); n > 0 {
						stamped[id] = n
					}
				}
				unstamped := 0
				if s.Batch != nil {
					unstamped = s.Batch.Unstamped
					assert.LessOrEqual(t, s.Batch.Done, s.Batch.Last)
					assert.LessOrEqual(t, uint64(unstamped), s.Batch.Last-s.Batch.Done)
				}
				require.Equal(t, len(ids), int(s.Last)+s.Waiting, "every record is numbered or waiting (k=%d)", k)
				require.Equal(t, int(s.Last)-unstamped, len(stamped), "records carrying their numbers (k=%d)", k)

				_, err = d.series.RunPass(ctx)
				require.NoError(t, err)
				finished, after := 0, 0
				for _, id := range ids {
					n := numberOf(t, d, id)
					require.NotZero(t, n, id)
					if old, ok := stamped[id]; ok {
						require.Equal(t, old, n, "a stamped record keeps its number")
						continue
					}
					if n <= s.Last {
						require.NotNil(t, s.Batch, "%s got %d, at or below Last, with no batch in flight", id, n)
						require.Greater(t, n, s.Batch.Done, id)
						finished++
					} else {
						after++
					}
				}
				assert.Equal(t, unstamped, finished, "the next pass finished the unstamped records (k=%d)", k)
				assert.Equal(t, s.Waiting, after, "and numbered the waiting ones after Last (k=%d)", k)
			}
			require.Positive(t, stopped)
			checkLedger(t, d, checkNumbered(t, d, ids))
		})
	}
}

// numberOf is the number record id carries in its Number field (0: none).
func numberOf(t *testing.T, d *device, id string) uint64 {
	t.Helper()
	r, err := d.receipts.Get(context.Background(), id)
	require.NoError(t, err)
	if r.Number == "" {
		return 0
	}
	var n uint64
	_, err = fmt.Sscanf(r.Number, "R-%05d", &n)
	require.NoError(t, err, r.Number)
	return n
}
