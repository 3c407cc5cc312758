package numbering_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// chaos injects faults into a store once armed: writes that fail before
// reaching the store, writes that are applied but report failure, lost
// compare-and-swap races and failing reads, each with probability p.
type chaos struct {
	armed atomic.Bool
	p     float64
	mu    sync.Mutex
	rng   *rand.Rand
	count atomic.Int64
}

var errChaos = errors.New("chaos: injected failure")

func (c *chaos) hit() bool {
	if !c.armed.Load() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng.Float64() < c.p {
		c.count.Add(1)
		return true
	}
	return false
}

func (c *chaos) options(hideTx bool) faultstore.Options {
	return faultstore.Options{
		HideTransactor: hideTx,
		Before: func(op faultstore.Op, _ string) error {
			if !c.hit() {
				return nil
			}
			if op == faultstore.OpCompareAndSwap || op == faultstore.OpUpdate {
				return stores.ErrConflict
			}
			return errChaos
		},
		After: func(faultstore.Op, string) error {
			if c.hit() {
				return faultstore.ErrInjectedAfter
			}
			return nil
		},
	}
}

// TestFaults runs passes on a store that fails at random, before and after
// writes, until one completes: every failed pass must leave a state the next
// one finishes without giving a number twice or recording it twice.
func TestFaults(t *testing.T) {
	for _, kind := range []struct {
		name   string
		hideTx bool
	}{{"tx", false}, {"cas", true}} {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			c := &chaos{p: 0.01, rng: rand.New(rand.NewPCG(1, 2))}
			d := openDevice(t, "till", faultstore.New(memstore.New(), c.options(kind.hideTx)), receiptOpts)
			numbering.Tune(d.series, 16, 40)
			var ids []string
			for round := range 6 {
				for i := range 150 {
					id := fmt.Sprintf("r-%d-%03d", round, i)
					d.write(t, id, i)
					ids = append(ids, id)
				}
				c.armed.Store(true)
				failures := 0
				for {
					_, err := d.series.RunPass(ctx)
					if err == nil {
						break
					}
					failures++
					require.Less(t, failures, 5000, "no pass completed: %v", err)
				}
				c.armed.Store(false)
				t.Logf("round %d: %d failed passes, %d faults so far", round, failures, c.count.Load())
				checkLedger(t, d, checkNumbered(t, d, ids))
			}
			require.NotZero(t, c.count.Load(), "no fault was injected")
		})
	}
}

// TestCancelledPass cancels passes after their k-th store operation, for
// every k up to the length of a whole pass: a pass stopped by its context
// anywhere is finished by the next one.
func TestCancelledPass(t *testing.T) {
	ctx := context.Background()
	var cut passCutter
	count := cut.hook
	d := openDevice(t, "till", faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true, Before: count}), receiptOpts)
	numbering.Tune(d.series, 4, 6)
	var ids []string
	for k := int64(1); ; k++ {
		for i := range 10 {
			id := fmt.Sprintf("r-%03d-%d", k, i)
			d.write(t, id, i)
			ids = append(ids, id)
		}
		_, err := cut.pass(ctx, d.series, k)
		if err == nil {
			t.Logf("passes cancelled after each of 1 to %d operations", k-1)
			break // k is past the end of a whole pass
		}
		require.ErrorIs(t, err, context.Canceled)
		_, err = d.series.RunPass(ctx)
		require.NoError(t, err)
		checkNumbered(t, d, ids)
	}
	checkLedger(t, d, checkNumbered(t, d, ids))
}
