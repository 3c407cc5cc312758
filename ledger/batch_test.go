package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// txCounter is a store whose transactions are counted, and whose
// transactions refuse to write the key "poison" (a write the store rejects,
// such as one too big).
type txCounter struct {
	stores.Store
	tr      stores.Transactor
	updates atomic.Int64
}

var errPoison = errors.New("store refuses this write")

func newTxCounter(st stores.Store) *txCounter {
	return &txCounter{Store: st, tr: st.(stores.Transactor)}
}

func (s *txCounter) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	s.updates.Add(1)
	return s.tr.Update(ctx, func(tx stores.Tx) error { return fn(poisonTx{tx}) })
}

type poisonTx struct{ stores.Tx }

func (t poisonTx) Put(key string, value []byte) error {
	if key == "poison" {
		return errPoison
	}
	return t.Tx.Put(key, value)
}

// holdQueue starts an Update on l that holds the commit until release is
// closed, and returns once it runs, so that later calls queue behind it.
func holdQueue(t *testing.T, l *ledger.Ledger) (release func(), done <-chan error) {
	t.Helper()
	started, gate := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- l.Update(context.Background(), func(stores.Tx) error {
			close(started)
			<-gate
			return nil
		})
	}()
	<-started
	return func() { close(gate) }, errc
}

// runTogether holds l's queue with an Update of its own, starts call(i)
// for each i of 0..n-1 in a goroutine of its own, and once all n wait in
// the queue runs queued (if not nil) and releases the hold, so that the n
// calls commit together (in the batches the queue cuts, in the order they
// queued). It returns their errors once every call has returned.
func runTogether(t *testing.T, l *ledger.Ledger, n int, queued func(), call func(i int) error) []error {
	t.Helper()
	release, held := holdQueue(t, l)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = call(i) })
	}
	waitQueued(l, n)
	if queued != nil {
		queued()
	}
	release()
	require.NoError(t, <-held)
	wg.Wait()
	return errs
}

// waitQueued spins until n calls wait in l's queue.
func waitQueued(l *ledger.Ledger, n int) {
	for ledger.Waiting(l) < n {
		runtime.Gosched()
	}
}

// writeFact is an Update closure that writes key and appends fact(i), then
// fails with fail (nil: succeeds).
func writeFact(l *ledger.Ledger, key string, i int, fail error) func(tx stores.Tx) error {
	return func(tx stores.Tx) error {
		if err := tx.Put(key, []byte(key)); err != nil {
			return err
		}
		if _, err := l.AppendTx(context.Background(), tx, fact(i)); err != nil {
			return err
		}
		return fail
	}
}

func TestBatchedUpdatesShareOneCommit(t *testing.T) {
	st := newTxCounter(memstore.New())
	l := newLedger(t, st)
	ctx := context.Background()

	const n = 20
	errFn := errors.New("this closure fails")
	var before int64
	errs := runTogether(t, l, n, func() { before = st.updates.Load() }, func(i int) error {
		var fail error
		if i%4 == 1 {
			fail = errFn
		}
		return l.Update(ctx, writeFact(l, fmt.Sprintf("k%02d", i), i+1, fail))
	})
	assert.Equal(t, int64(1), st.updates.Load()-before, "the queued Updates share one store transaction")

	var want []string
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		_, err := st.Get(ctx, key)
		if i%4 == 1 {
			assert.ErrorIs(t, errs[i], errFn, "a failing closure gets its own error, unchanged")
			assert.ErrorIs(t, err, stores.ErrNotFound, "and its writes are dropped")
			continue
		}
		assert.NoError(t, errs[i])
		assert.NoError(t, err, "a closure next to a failing one commits")
		want = append(want, fmt.Sprintf("inv-%d", i+1))
	}
	var got []string
	for _, e := range readAll(t, l, 1) {
		got = append(got, e.ID)
	}
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got, "the ledger holds the entries of the closures that succeeded, and only them")
	verifyClean(t, l, uint64(len(want)))
}

func TestPanicInBatchedUpdateIsItsCallers(t *testing.T) {
	st := memstore.New()
	l := newLedger(t, st)
	ctx := context.Background()

	var panicked atomic.Value
	errs := runTogether(t, l, 3, nil, func(i int) (err error) {
		defer func() {
			if p := recover(); p != nil {
				panicked.Store(p)
			}
		}()
		return l.Update(ctx, func(tx stores.Tx) error {
			if err := writeFact(l, fmt.Sprintf("k%d", i), i+1, nil)(tx); err != nil {
				return err
			}
			if i == 1 {
				panic("closure 1 panics")
			}
			return nil
		})
	})
	assert.Equal(t, "closure 1 panics", panicked.Load(), "the panic goes on in its caller's goroutine")
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[2])
	_, err := st.Get(ctx, "k1")
	assert.ErrorIs(t, err, stores.ErrNotFound, "the panicking closure's writes are dropped")
	verifyClean(t, l, 2)
}

func TestBatchRefusedAsAWholeRunsApart(t *testing.T) {
	st := newTxCounter(memstore.New())
	l := newLedger(t, st)
	ctx := context.Background()

	const n = 9
	errs := runTogether(t, l, n, nil, func(i int) error {
		key := fmt.Sprintf("k%d", i)
		if i == 4 {
			key = "poison" // the store refuses this one's write, spoiling the batch
		}
		return l.Update(ctx, writeFact(l, key, i+1, nil))
	})
	for i := range n {
		if i == 4 {
			assert.ErrorIs(t, errs[i], errPoison, "the refused write fails its own call")
			continue
		}
		assert.NoError(t, errs[i], "call %d does not fail because of another", i)
		_, err := st.Get(ctx, fmt.Sprintf("k%d", i))
		assert.NoError(t, err)
	}
	verifyClean(t, l, n-1)
}

func TestAppendsAndUpdatesInOneBatchChainInOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		if _, ok := st.(stores.Transactor); !ok || !st.Capabilities().Transactions {
			t.Skip("Update needs transactions; appends alone are covered elsewhere")
		}
		l := newLedger(t, st)
		ctx := context.Background()
		const n = 30
		heads := make([]ledger.Head, n)
		errs := runTogether(t, l, n, nil, func(i int) (err error) {
			switch i % 3 {
			case 0:
				heads[i], err = l.Append(ctx, fact(i+1), fact(1000+i))
			case 1:
				heads[i], err = l.AppendFunc(ctx, func(h ledger.Head) ([]ledger.Entry, error) {
					return []ledger.Entry{fact(i + 1)}, nil
				})
			default:
				err = l.Update(ctx, writeFact(l, fmt.Sprintf("k%d", i), i+1, nil))
			}
			return err
		})
		total := uint64(0)
		for i := range n {
			require.NoError(t, errs[i])
			if i%3 == 0 {
				total += 2
			} else {
				total++
			}
		}
		verifyClean(t, l, total)
		// Each append's head is the position of its last entry.
		entries := readAll(t, l, 1)
		for i := range n {
			if i%3 == 2 {
				continue
			}
			want := fmt.Sprintf("inv-%d", i+1)
			if i%3 == 0 {
				want = fmt.Sprintf("inv-%d", 1000+i)
			}
			require.NotZero(t, heads[i].Seq)
			assert.Equal(t, want, entries[heads[i].Seq-1].ID, "call %d's head is its own last entry", i)
		}
	})
}

func TestUpdateMayNotWriteTheHead(t *testing.T) {
	st := memstore.New()
	l := newLedger(t, st)
	ctx := context.Background()
	appendN(t, l, 2)
	err := l.Update(ctx, func(tx stores.Tx) error { return tx.Put(headKey, []byte("forged head")) })
	assert.ErrorIs(t, err, stores.ErrInvalidKey)
	err = l.Update(ctx, func(tx stores.Tx) error { return tx.Delete(headKey) })
	assert.ErrorIs(t, err, stores.ErrInvalidKey)
	verifyClean(t, l, 2)
}

func TestQueuedUpdateCancelledTakesNothing(t *testing.T) {
	st := memstore.New()
	l := newLedger(t, st)
	release, held := holdQueue(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	ran := atomic.Bool{}
	go func() {
		errc <- l.Update(ctx, func(tx stores.Tx) error { ran.Store(true); return writeFact(l, "k", 1, nil)(tx) })
	}()
	waitQueued(l, 1)
	cancel()
	assert.ErrorIs(t, <-errc, context.Canceled)
	release()
	require.NoError(t, <-held)
	assert.False(t, ran.Load(), "a call cancelled while queued never runs")
	verifyClean(t, l, 0)
}

func TestLeaderGivingUpDoesNotFailTheOthers(t *testing.T) {
	st := newTxCounter(memstore.New())
	l := newLedger(t, st)
	release, held := holdQueue(t, l)

	// The first queued call leads the next batch; it gives up while the
	// batch runs (its context ends inside its own function).
	leaderCtx, cancel := context.WithCancel(context.Background())
	errs := make([]error, 4)
	var wg sync.WaitGroup
	wg.Go(func() {
		errs[0] = l.Update(leaderCtx, func(tx stores.Tx) error {
			cancel()
			_, err := l.AppendTx(leaderCtx, tx, fact(1))
			return err
		})
	})
	waitQueued(l, 1)
	for i := 1; i < 4; i++ {
		wg.Go(func() { errs[i] = l.Update(context.Background(), writeFact(l, fmt.Sprintf("k%d", i), i+1, nil)) })
	}
	waitQueued(l, 4)
	release()
	require.NoError(t, <-held)
	wg.Wait()
	assert.ErrorIs(t, errs[0], context.Canceled, "the caller that gave up gets its context's error")
	for i := 1; i < 4; i++ {
		assert.NoError(t, errs[i], "call %d is not failed by the leader giving up", i)
	}
	verifyClean(t, l, 3)
}
