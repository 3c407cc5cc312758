package numbering_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// lostLock is a store with transactions whose pass lock is always free: it
// stands for a lock its holder lost while its pass went on (a pgstore
// advisory lock whose connection broke), as the next pass sees it.
type lostLock struct{ stores.Store }

func (l lostLock) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return l.Store.(stores.Transactor).Update(ctx, fn)
}

func (lostLock) Lock(context.Context, string) (func(), error)    { return func() {}, nil }
func (lostLock) TryLock(context.Context, string) (func(), error) { return func() {}, nil }

// A pass that lost its lock after planning (another pass took the series
// meanwhile, committed its batch and stopped before finishing it) must not
// touch the other pass's batch: it fails with ErrPassRunning, and the next
// pass finishes the batch as recorded, numbering every record exactly once.
func TestPassThatLostItsLockLeavesTheOtherBatchIntact(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	var (
		armed     atomic.Bool // A's pass is to be overtaken at its chunks
		committed atomic.Bool // B's batch is in its head
		b         *device
		bErr      error
	)
	aStore := faultstore.New(mem, faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if op == faultstore.OpList && strings.HasSuffix(key, "/batch/") && armed.CompareAndSwap(true, false) {
				_, bErr = b.series.RunPass(ctx)
			}
			return nil
		},
	})
	bStore := faultstore.New(mem, faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if committed.Load() && op.IsWrite() {
				return faultstore.ErrInjected // B stops right after its commit
			}
			return nil
		},
		After: func(op faultstore.Op, key string) error {
			// The commit: the head's compare-and-swap, or the transaction
			// that writes it with the chunks.
			if (op == faultstore.OpUpdate || op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "/head")) && !armed.Load() {
				committed.Store(true)
			}
			return nil
		},
	})
	a := openDevice(t, "a", lostLock{aStore}, receiptOpts)
	b = openDevice(t, "b", lostLock{bStore}, receiptOpts)
	var ids []string
	for i := range 5 {
		ids = append(ids, fmt.Sprint("r-", i))
		a.write(t, ids[i], i)
	}

	armed.Store(true)
	_, err := a.series.RunPass(ctx)
	require.ErrorIs(t, bErr, faultstore.ErrInjected, "B committed its batch and stopped")
	assert.ErrorIs(t, err, numbering.ErrPassRunning, "A may not commit over B")
	committed.Store(false)

	rep, err := a.series.RunPass(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Resumed)
	checkLedger(t, a, checkNumbered(t, a, ids))
}

// A pass that lost its lock while finishing its batch, overtaken by a pass
// that committed the next batch and stopped, must not delete the chunks of
// that batch: the next pass finishes it as recorded.
func TestPassThatLostItsLockKeepsTheNextBatchChunks(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	var (
		committed atomic.Bool
		armed     atomic.Bool
	)
	a := openDevice(t, "a", lostLock{mem}, receiptOpts)
	bStore := faultstore.New(mem, faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if committed.Load() && op.IsWrite() {
				return faultstore.ErrInjected // B stops right after its commit
			}
			return nil
		},
		After: func(op faultstore.Op, key string) error {
			if armed.Load() && (op == faultstore.OpUpdate || op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "receipts/head")) {
				committed.Store(true)
			}
			return nil
		},
	})
	b := openDevice(t, "b", lostLock{bStore}, receiptOpts)
	var ids []string
	for i := range 3 {
		ids = append(ids, fmt.Sprint("r-", i))
		a.write(t, ids[i], i)
	}
	var bErr error
	ran := false
	numbering.OnCleared(a.series, func() {
		if ran {
			return
		}
		ran = true
		for i := 3; i < 6; i++ {
			ids = append(ids, fmt.Sprint("r-", i))
			b.write(t, ids[i], i)
		}
		armed.Store(true)
		_, bErr = b.series.RunPass(ctx)
	})
	_, err := a.series.RunPass(ctx)
	require.True(t, ran)
	require.ErrorIs(t, bErr, faultstore.ErrInjected, "B committed its batch and stopped")
	require.NoError(t, err, "A finished its own batch")
	armed.Store(false)
	committed.Store(false)

	rep, err := b.series.RunPass(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{Assigned: 3, Resumed: 3}, rep)
	checkLedger(t, a, checkNumbered(t, a, ids))
}

// A pass overtaken between its commit and its first read of its own
// batch's chunks (a pass elsewhere, under a lock of its own process,
// finished the batch and cleared them) lost the race: ErrPassRunning, not
// ErrCorrupt, and every record is numbered exactly once, by the other.
func TestPassOvertakenBeforeReadingItsChunks(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	var (
		armed atomic.Bool
		b     *device
		bRep  numbering.PassReport
		bErr  error
	)
	aStore := faultstore.New(mem, faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if op == faultstore.OpGet && strings.Contains(key, "/batch/") && armed.CompareAndSwap(true, false) {
				bRep, bErr = b.series.RunPass(ctx)
			}
			return nil
		},
	})
	a := openDevice(t, "a", lostLock{aStore}, receiptOpts)
	b = openDevice(t, "b", lostLock{mem}, receiptOpts)
	var ids []string
	for i := range 4 {
		ids = append(ids, fmt.Sprint("r-", i))
		a.write(t, ids[i], i)
	}

	armed.Store(true)
	_, err := a.series.RunPass(ctx)
	require.False(t, armed.Load(), "A read its chunks")
	require.NoError(t, bErr)
	assert.Equal(t, 4, bRep.Resumed, "B finished A's batch")
	assert.ErrorIs(t, err, numbering.ErrPassRunning)
	assert.NotErrorIs(t, err, numbering.ErrCorrupt)
	checkLedger(t, a, checkNumbered(t, a, ids))

	// A later pass finds nothing left to do.
	rep, err := a.series.RunPass(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{}, rep)
}

// A pass overtaken after reading its chunks, while it stamps (the other
// pass finished its batch meanwhile), stops with ErrPassRunning before it
// appends: every number has exactly one ledger entry.
func TestPassOvertakenWhileStampingAppendsNothing(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	var (
		state atomic.Int32 // 1: armed, 2: A read a chunk, 3: B ran
		b     *device
		bRep  numbering.PassReport
		bErr  error
	)
	aStore := faultstore.New(mem, faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if op == faultstore.OpGet && strings.Contains(key, "/batch/") {
				state.CompareAndSwap(1, 2)
				return nil
			}
			if state.CompareAndSwap(2, 3) { // A's first step after its chunks
				bRep, bErr = b.series.RunPass(ctx)
			}
			return nil
		},
	})
	a := openDevice(t, "a", lostLock{aStore}, receiptOpts)
	b = openDevice(t, "b", lostLock{mem}, receiptOpts)
	var ids []string
	for i := range 4 {
		ids = append(ids, fmt.Sprint("r-", i))
		a.write(t, ids[i], i)
	}

	state.Store(1)
	_, err := a.series.RunPass(ctx)
	require.Equal(t, int32(3), state.Load(), "B ran while A stamped")
	require.NoError(t, bErr)
	assert.Equal(t, 4, bRep.Resumed, "B finished A's batch")
	assert.ErrorIs(t, err, numbering.ErrPassRunning)
	checkLedger(t, a, checkNumbered(t, a, ids))
}
