package sequence_test

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestNextNBlocks: callers of Next and NextN on one counter at once, on both
// allocation paths. Every number 1..N is taken exactly once, and each NextN
// call gets its k numbers in one unbroken block.
func TestNextNBlocks(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			q := mustSequence(t, newService(t, kind.new(memstore.New(), faultstore.Options{}), sequence.Config{}), "inv")
			const callers, rounds = 16, 30
			var mu sync.Mutex
			var got []uint64
			var wg sync.WaitGroup
			for c := range callers {
				wg.Go(func() {
					for r := range rounds {
						k := 1 + (c+r)%7
						var nums []uint64
						if k == 1 && c%2 == 0 {
							n, err := q.Next(ctx)
							require.NoError(t, err)
							nums = append(nums, n)
						} else {
							first, err := q.NextN(ctx, k)
							require.NoError(t, err)
							for i := range uint64(k) {
								nums = append(nums, first+i)
							}
						}
						mu.Lock()
						got = append(got, nums...)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			requireExactly(t, got, len(got))
			head, err := q.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(len(got)), head)
		})
	}
}

// NextN refuses a count out of range, and a block past the largest number,
// taking nothing either way.
func TestNextNRefusals(t *testing.T) {
	ctx := context.Background()
	q := mustSequence(t, newService(t, memstore.New(), sequence.Config{}), "inv")
	_, err := q.NextN(ctx, 3)
	require.NoError(t, err)
	for _, k := range []int{0, -1, sequence.MaxNextN + 1} {
		_, err := q.NextN(ctx, k)
		assert.ErrorIs(t, err, sequence.ErrInvalid, "k=%d", k)
		var ve *sequence.ValidationError
		assert.ErrorAs(t, err, &ve, "k=%d", k)
	}
	head, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), head)

	require.NoError(t, q.SeedTo(ctx, math.MaxUint64-2))
	_, err = q.NextN(ctx, 5)
	assert.ErrorIs(t, err, sequence.ErrOverflow)
	head, err = q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64-2), head, "nothing taken")
	first, err := q.NextN(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, uint64(math.MaxUint64-1), first, "the last two numbers fit")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = q.NextN(cctx, 2)
	assert.ErrorIs(t, err, context.Canceled)
}

// On a store without atomic compare-and-swap NextN refuses as Next does.
func TestNextNOffline(t *testing.T) {
	st := faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true, NotCASAtomic: true})
	q := mustSequence(t, newService(t, st, sequence.Config{}), "inv")
	_, err := q.NextN(context.Background(), 2)
	assert.ErrorIs(t, err, sequence.ErrOffline)
}
