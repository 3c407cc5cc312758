package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
)

// Size of the compare-and-swap race: raceWorkers goroutines each increment
// one counter raceRounds times.
const (
	raceWorkers = 64
	raceRounds  = 200
)

// testConcurrentList lists while another goroutine creates and deletes keys
// between the listed ones: every listing must be in order, hold each stable
// key exactly once, and never pair a key with another key's value.
func (s suite) testConcurrentList(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	const stable = 40
	for i := range stable {
		k := fmt.Sprintf("s/%03d", i)
		put(t, st, k, []byte(k))
	}
	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("s/%03d~churn", i%stable)
			if _, err := st.Put(ctx, k, []byte(k)); !assert.NoError(t, err, "churn Put") {
				return
			}
			if i%3 != 0 {
				if !assert.NoError(t, st.Delete(ctx, k), "churn Delete") {
					return
				}
			}
		}
	})
	var listers sync.WaitGroup
	for range 2 {
		listers.Go(func() {
			for range 15 {
				var keys []string
				found := 0
				for it, err := range st.List(ctx, "s/") {
					if !assert.NoError(t, err) {
						return
					}
					keys = append(keys, it.Key)
					assert.Equal(t, it.Key, string(it.Value), "a listed key carries its own value")
					assert.NotZero(t, it.Version)
					if len(it.Key) == len("s/000") {
						found++
					}
				}
				assert.True(t, slices.IsSorted(keys), "keys in order while writes happen")
				assert.Equal(t, len(keys), len(slices.Compact(slices.Clone(keys))), "no key listed twice")
				assert.Equal(t, stable, found, "every untouched key is listed")
			}
		})
	}
	listers.Wait()
	close(stop)
	writer.Wait()
}

// testConcurrentGet reads a key while it is overwritten with values of
// another length: a read sees one whole value, never a mix.
func (s suite) testConcurrentGet(t *testing.T) {
	st := s.open(t)
	ctx := context.Background()
	a := bytes.Repeat([]byte{'a'}, 64<<10)
	b := bytes.Repeat([]byte{'b'}, 48<<10)
	put(t, st, "torn", a)
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		defer done.Store(true)
		for i := range 60 {
			v := a
			if i%2 == 0 {
				v = b
			}
			if _, err := st.Put(ctx, "torn", v); !assert.NoError(t, err) {
				return
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for reads := 0; reads < 20 || !done.Load(); reads++ {
				it, err := st.Get(ctx, "torn")
				if !assert.NoError(t, err) {
					return
				}
				if !bytes.Equal(it.Value, a) && !bytes.Equal(it.Value, b) {
					assert.Fail(t, "torn read", "read %d bytes that are neither value", len(it.Value))
					return
				}
			}
		})
	}
	wg.Wait()
}

// casOutcome is one successful compare-and-swap: the version it replaced and
// the one it created.
type casOutcome struct{ from, to uint64 }

// testCASRace makes raceWorkers goroutines increment one counter with
// read-then-CompareAndSwap, retrying on ErrConflict. With an atomic
// compare-and-swap no increment is lost and every success replaced a
// different version.
func (s suite) testCASRace(t *testing.T) {
	st := s.open(t)
	if !st.Capabilities().CASAtomic {
		t.Skip("store does not report CASAtomic; the race would be allowed to lose updates")
	}
	ctx := context.Background()
	v0 := put(t, st, "counter", []byte("0"))

	outcomes := make([][]casOutcome, raceWorkers)
	var conflicts atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range raceWorkers {
		wg.Go(func() {
			mine := make([]casOutcome, 0, raceRounds)
			defer func() { outcomes[w] = mine }()
			<-start
			for range raceRounds {
				for {
					it, err := st.Get(ctx, "counter")
					if !assert.NoError(t, err) {
						return
					}
					n, err := strconv.Atoi(string(it.Value))
					if !assert.NoError(t, err, "counter value") {
						return
					}
					v, err := st.CompareAndSwap(ctx, "counter", it.Version, []byte(strconv.Itoa(n+1)))
					if errors.Is(err, stores.ErrConflict) {
						conflicts.Add(1)
						runtime.Gosched()
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					mine = append(mine, casOutcome{from: it.Version, to: v})
					break
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d compare-and-swaps lost a race and were retried", conflicts.Load())

	final, err := st.Get(ctx, "counter")
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(raceWorkers*raceRounds), string(final.Value), "no increment was lost")
	checkChain(t, v0, final.Version, slices.Concat(outcomes...), raceWorkers*raceRounds)
}

// checkChain asserts that the successful swaps form one chain of versions
// from first to last: each version was replaced at most once, and every
// version created was new.
func checkChain(t *testing.T, first, last uint64, outcomes []casOutcome, want int) {
	t.Helper()
	assert.Len(t, outcomes, want, "successful compare-and-swaps")
	from := make(map[uint64]int, len(outcomes))
	to := make(map[uint64]int, len(outcomes))
	for _, o := range outcomes {
		from[o.from]++
		to[o.to]++
	}
	reused, dup := 0, 0
	for _, n := range from {
		if n > 1 {
			reused++
		}
	}
	for _, n := range to {
		if n > 1 {
			dup++
		}
	}
	assert.Zero(t, reused, "versions replaced by more than one successful compare-and-swap (lost updates)")
	assert.Zero(t, dup, "versions handed out more than once")
	assert.Zero(t, to[first], "the initial version was handed out again")
	assert.Equal(t, 1, from[first], "the initial version was replaced exactly once")
	assert.Equal(t, 1, to[last], "the final version came from a successful compare-and-swap")
	assert.Zero(t, from[last], "the final version was never replaced")
}
