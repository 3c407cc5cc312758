package sequence_test

import (
	"context"
	"testing"

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
