package sequence_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
)

func TestVoid(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			inner := newMem()
			j := &journal{}
			svc := newService(t, kind.new(inner, faultstore.Options{}), sequence.Config{Journal: j})
			q := mustSequence(t, svc, "inv", sequence.Options{Partition: []any{2026}})
			assert.ErrorIs(t, q.Void(ctx, 1, "nothing issued"), sequence.ErrNotIssued)
			for range 3 {
				_, err := q.Next(ctx)
				require.NoError(t, err)
			}
			assert.ErrorIs(t, q.Void(ctx, 0, "zero"), sequence.ErrNotIssued)
			assert.ErrorIs(t, q.Void(ctx, 4, "future"), sequence.ErrNotIssued)
			assert.ErrorIs(t, q.Void(ctx, 2, ""), sequence.ErrInvalid)
			assert.ErrorIs(t, q.Void(ctx, 2, strings.Repeat("x", sequence.MaxReasonLen+1)), sequence.ErrInvalid)

			require.NoError(t, q.Void(ctx, 2, "customer cancelled"))
			err := q.Void(ctx, 2, "again")
			assert.ErrorIs(t, err, sequence.ErrAlreadyVoided)

			reason, voided, err := q.Voided(ctx, 2)
			require.NoError(t, err)
			assert.True(t, voided)
			assert.Equal(t, "customer cancelled", reason)
			_, voided, err = q.Voided(ctx, 3)
			require.NoError(t, err)
			assert.False(t, voided)

			n, err := q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(4), n, "voiding never rewinds")
			if kind.name == "tx" {
				assert.Contains(t, journalKeys(t, inner), "journal/inv/2026/voided/2")
			} else {
				assert.Contains(t, j.events, sequence.Event{Kind: sequence.Voided, Series: "inv", Partition: []string{"2026"}, Number: 2, Reason: "customer cancelled"})
			}
		})
	}
}

func TestVoidConcurrentOnce(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "inv")
			require.NoError(t, q.SeedTo(ctx, 10))
			var ok, already atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					switch err := q.Void(ctx, 7, "dup"); {
					case err == nil:
						ok.Add(1)
					case assert.ErrorIs(t, err, sequence.ErrAlreadyVoided):
						already.Add(1)
					}
				})
			}
			wg.Wait()
			assert.Equal(t, int64(1), ok.Load())
			assert.Equal(t, int64(15), already.Load())
		})
	}
}
