package sequence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// openBadger opens a durable badger store (fsync on every commit) in a temporary folder.
func openBadger(tb testing.TB) *badgerstore.Store {
	tb.Helper()
	s, err := badgerstore.Open(tb.TempDir(), nil)
	require.NoError(tb, err)
	require.True(tb, s.Capabilities().Durable)
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestNextConcurrentBadgerDurable(t *testing.T) {
	workers, calls := 64, 200
	if testing.Short() {
		calls = 20
	}
	store := openBadger(t)
	j := &journal{}
	q := mustSequence(t, sequence.NewService(store, newSealer(), "v/", sequence.Config{Journal: j}), "hot")
	got := hammer(t, workers, calls, q.Next)
	requireExactly(t, got, workers*calls)
	assert.Len(t, journalKeys(t, store), workers*calls, "one journal entry per number, in the same commits")
}

// The full proof on badger: 256 goroutines × 1,000 Next on one
// series give exactly 1..256,000 with no error of any kind (contention
// included). Commits are not synced here, which changes nothing about
// atomicity; TestNextConcurrentBadgerDurable covers the synced path.
func TestNextConcurrentBadger256(t *testing.T) {
	workers, calls := 256, 1000
	if testing.Short() {
		calls = 50
	}
	store, err := badgerstore.Open(t.TempDir(), &badgerstore.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	q := mustSequence(t, sequence.NewService(store, newSealer(), "v/", sequence.Config{}), "hot")
	got := hammer(t, workers, calls, q.Next)
	requireExactly(t, got, workers*calls)
}

func TestClaimUnderFaultsBadger(t *testing.T) {
	const workers, calls = 16, 50
	store := faultstore.New(openBadger(t), faultstore.Options{Seed: 9, FailBefore: 0.05, FailAfter: 0.05, Conflict: 0.02})
	q := mustSequence(t, sequence.NewService(store, newSealer(), "v/", sequence.Config{}), "claims")
	got := hammer(t, workers, calls, func(ctx context.Context) (uint64, error) {
		id := sequence.NewRequestID()
		for attempt := 0; ; attempt++ {
			n, err := q.Claim(ctx, id)
			if err == nil {
				return n, nil
			}
			if attempt >= 100 {
				return 0, fmt.Errorf("claim keeps failing: %w", err)
			}
		}
	})
	requireExactly(t, got, workers*calls)
}

// Two Services on one badger store race through real transaction conflicts.
func TestTwoServicesBadger(t *testing.T) {
	const workers, calls = 16, 50
	store := openBadger(t)
	sealer := newSealer()
	var got [2][]uint64
	var wg sync.WaitGroup
	for i := range got {
		q := mustSequence(t, sequence.NewService(store, sealer, "v/", sequence.Config{}), "shared")
		wg.Go(func() {
			got[i] = hammer(t, workers, calls, func(ctx context.Context) (uint64, error) {
				for {
					n, err := q.Next(ctx)
					if !errors.Is(err, sequence.ErrContention) {
						return n, err
					}
				}
			})
		})
	}
	wg.Wait()
	all := append(got[0], got[1]...)
	requireExactly(t, all, 2*workers*calls)
}

// BenchmarkNextBadgerDurable64 is about 64 goroutines calling Next on one
// series of a durable badger store: combined, one commit serves many calls.
func BenchmarkNextBadgerDurable64(b *testing.B) {
	store := openBadger(b)
	q, err := sequence.NewService(store, newSealer(), "", sequence.Config{}).Sequence("bench", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	parallel(b, 64, nextOf(q))
}

// BenchmarkPlainCASBadgerDurable64 is the naive baseline for
// BenchmarkNextBadgerDurable64: each call reads the sealed counter, opens it,
// and compare-and-swaps it one higher, retrying (with the shared backoff)
// until it wins.
func BenchmarkPlainCASBadgerDurable64(b *testing.B) {
	store := openBadger(b)
	sealer := newSealer()
	const key = "_sequences/bench"
	unbounded := cas.Policy{MaxAttempts: 1 << 30}
	parallel(b, 64, func(ctx context.Context) error {
		_, err := cas.Do(ctx, unbounded, func(int) error {
			item, err := store.Get(ctx, key)
			var n uint64
			switch {
			case err == nil:
				plain, err := sealer.Open(key, item.Value)
				if err != nil {
					return err
				}
				if _, err := fmt.Sscan(string(plain), &n); err != nil {
					return err
				}
			case !errors.Is(err, stores.ErrNotFound):
				return err
			}
			sealed, err := sealer.Seal(key, fmt.Append(nil, n+1))
			if err != nil {
				return err
			}
			_, err = store.CompareAndSwap(ctx, key, item.Version, sealed)
			return err
		})
		return err
	})
}
