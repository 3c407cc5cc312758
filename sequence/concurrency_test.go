package sequence_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// hammer runs workers goroutines that each call next calls times and returns
// every number they got, failing the test on any error.
func hammer(t testing.TB, workers, calls int, next func(context.Context) (uint64, error)) []uint64 {
	t.Helper()
	out := make([][]uint64, workers)
	var wg sync.WaitGroup
	var failures atomic.Int64
	for w := range workers {
		wg.Go(func() {
			got := make([]uint64, 0, calls)
			for range calls {
				n, err := next(context.Background())
				if err != nil {
					if failures.Add(1) <= 5 {
						t.Errorf("worker %d: %v", w, err)
					}
					continue
				}
				got = append(got, n)
			}
			out[w] = got
		})
	}
	wg.Wait()
	require.Zero(t, failures.Load(), "errors, contention included")
	var all []uint64
	for _, got := range out {
		all = append(all, got...)
	}
	return all
}

func TestNextConcurrentExact(t *testing.T) {
	workers, calls := 256, 1000
	if testing.Short() {
		calls = 100
	}
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "hot")
			got := hammer(t, workers, calls, q.Next)
			requireExactly(t, got, workers*calls)
			n, err := q.Peek(context.Background())
			require.NoError(t, err)
			assert.Equal(t, uint64(workers*calls), n)
		})
	}
}

// Each caller's numbers increase: a later call never gets a smaller number.
func TestNextIsMonotonicPerCaller(t *testing.T) {
	svc := newService(t, newMem(), sequence.Config{})
	q := mustSequence(t, svc, "mono")
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			var last uint64
			for range 200 {
				n, err := q.Next(context.Background())
				if !assert.NoError(t, err) {
					return
				}
				assert.Greater(t, n, last)
				last = n
			}
		})
	}
	wg.Wait()
}

func TestTwoServicesOneStore(t *testing.T) {
	const workers, calls = 64, 300
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			inner := newMem()
			sealer := newSealer()
			var contention atomic.Int64
			var mu sync.Mutex
			var all []uint64
			var wg sync.WaitGroup
			for range 2 {
				svc := sequence.NewService(kind.new(inner, faultstore.Options{}), sealer, "v/", sequence.Config{})
				q := mustSequence(t, svc, "shared")
				wg.Go(func() {
					got := hammer(t, workers, calls, func(ctx context.Context) (uint64, error) {
						for {
							n, err := q.Next(ctx)
							if errors.Is(err, sequence.ErrContention) {
								contention.Add(1)
								continue // the caller decides to retry
							}
							return n, err
						}
					})
					mu.Lock()
					all = append(all, got...)
					mu.Unlock()
				})
			}
			wg.Wait()
			requireExactly(t, all, 2*workers*calls)
			t.Logf("%s: %d contention errors over %d allocations", kind.name, contention.Load(), len(all))
		})
	}
}

func TestJournalConcurrent(t *testing.T) {
	const workers, calls = 32, 100
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			inner := newMem()
			j := &journal{}
			svc := newService(t, kind.new(inner, faultstore.Options{}), sequence.Config{Journal: j})
			q := mustSequence(t, svc, "j", sequence.Options{Partition: []any{7}})
			got := hammer(t, workers, calls, q.Next)
			requireExactly(t, got, workers*calls)
			var numbers []uint64
			if kind.name == "tx" {
				keys := journalKeys(t, inner)
				assert.Len(t, keys, workers*calls)
				assert.Contains(t, keys, "journal/j/7/allocated/1")
				assert.Empty(t, j.events)
				return
			}
			for _, e := range j.events {
				assert.Equal(t, sequence.Allocated, e.Kind)
				assert.Equal(t, "j", e.Series)
				assert.Equal(t, []string{"7"}, e.Partition)
				numbers = append(numbers, e.Number)
			}
			requireExactly(t, numbers, workers*calls)
		})
	}
}

func TestJournalErrorAbortsAllocation(t *testing.T) {
	ctx := context.Background()
	inner := newMem()
	j := &journal{}
	svc := newService(t, faultstore.New(inner, faultstore.Options{}), sequence.Config{Journal: j})
	q := mustSequence(t, svc, "j")
	n, err := q.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)

	boom := errors.New("ledger full")
	j.setFail(boom)
	n, err = q.Next(ctx)
	assert.ErrorIs(t, err, boom)
	assert.Zero(t, n)
	assert.ErrorIs(t, q.SeedTo(ctx, 10), boom)
	_, err = q.Claim(ctx, "req")
	assert.ErrorIs(t, err, boom)
	_, err = q.Bind(ctx, func(stores.Tx, sequence.Serial) error { return nil })
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, q.Void(ctx, 1, "typo"), boom)
	peek, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), peek, "no number taken")

	j.setFail(nil)
	n, err = q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
	assert.Equal(t, []string{"journal/j//allocated/1", "journal/j//allocated/2"}, journalKeys(t, inner))
}

func TestJournalEvents(t *testing.T) {
	ctx := context.Background()
	j := &journal{}
	svc := newService(t, faultstore.New(newMem(), faultstore.Options{HideTransactor: true}), sequence.Config{Journal: j})
	q := mustSequence(t, svc, "ev", sequence.Options{Partition: []any{"EU"}})
	_, err := q.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, q.SeedTo(ctx, 10))
	require.NoError(t, q.SeedTo(ctx, 5)) // no-op: no event
	id := sequence.NewRequestID()
	_, err = q.Claim(ctx, id)
	require.NoError(t, err)
	_, err = q.Claim(ctx, id) // adopted: no event
	require.NoError(t, err)
	require.NoError(t, q.Void(ctx, 11, "cancelled"))
	p := []string{"EU"}
	assert.Equal(t, []sequence.Event{
		{Kind: sequence.Allocated, Series: "ev", Partition: p, Number: 1},
		{Kind: sequence.Seeded, Series: "ev", Partition: p, Number: 10, From: 1},
		{Kind: sequence.Allocated, Series: "ev", Partition: p, Number: 11, RequestID: id},
		{Kind: sequence.Voided, Series: "ev", Partition: p, Number: 11, Reason: "cancelled"},
	}, j.events)

	// Without transactions the journal runs after the write: on failure the
	// number is taken and returned with the error.
	boom := errors.New("ledger full")
	j.setFail(boom)
	n, err := q.Next(ctx)
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, uint64(12), n)
	assert.Equal(t, "allocated", sequence.Allocated.String())
	assert.Equal(t, "seeded", sequence.Seeded.String())
	assert.Equal(t, "voided", sequence.Voided.String())
	assert.Equal(t, "unknown", sequence.EventKind(0).String())
}

// counterPins is an in-memory sequence.Pins.
type counterPins struct {
	mu   sync.Mutex
	pins map[string]uint64
}

var errCounterRollback = errors.New("test pins: counter rolled back")

func (p *counterPins) CounterPin(key string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pins[key]
}

func (p *counterPins) CheckCounter(key string, value uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if value < p.pins[key] {
		return fmt.Errorf("counter %d, pinned %d: %w", value, p.pins[key], errCounterRollback)
	}
	return nil
}

func (p *counterPins) RaiseCounter(key string, value uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pins == nil {
		p.pins = map[string]uint64{}
	}
	p.pins[key] = max(p.pins[key], value)
	return nil
}

// A counter transaction whose snapshot is older than a value pinned while it
// ran (another service sharing the pins took a number) is stale, not rolled
// back: it is retried and takes the next number.
func TestStaleCounterSnapshotIsNotRollback(t *testing.T) {
	ctx := context.Background()
	st, err := badgerstore.Open("", &badgerstore.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	pins := &counterPins{}
	adv := faultstore.NewAdversary(st)
	sealer := newSealer()
	mine := mustSequence(t, sequence.NewService(adv.Store(), sealer, "v/", sequence.Config{Journal: &journal{}, Pins: pins}), "inv")
	other := mustSequence(t, sequence.NewService(st, sealer, "v/", sequence.Config{Journal: &journal{}, Pins: pins}), "inv")

	n, err := mine.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
	adv.InNextTransaction(func() {
		n, err := other.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(2), n)
	})
	n, err = mine.Next(ctx)
	require.NoError(t, err, "a stale snapshot is retried, not a rollback")
	assert.Equal(t, uint64(3), n)
}

// smallTxStore refuses, as too big, a transaction that writes more than
// limit keys (as badger refuses one over its size limit).
type smallTxStore struct {
	stores.Store
	tr    stores.Transactor
	limit int
}

func (s smallTxStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.tr.Update(ctx, func(tx stores.Tx) error {
		return fn(&countingTx{Tx: tx, left: s.limit})
	})
}

type countingTx struct {
	stores.Tx
	left int
}

func (t *countingTx) Put(key string, value []byte) error {
	if t.left--; t.left < 0 {
		return fmt.Errorf("test store: transaction too big: %w", stores.ErrTooLarge)
	}
	return t.Tx.Put(key, value)
}

// Concurrent Bind calls whose writes together are more than one
// transaction can carry are written in smaller batches: every caller gets
// its number. A caller whose own writes are too big fails alone, and takes
// no number.
func TestBindBatchTooBigIsSplit(t *testing.T) {
	const callers = 200
	ctx := context.Background()
	inner := newMem()
	st := smallTxStore{Store: inner, tr: inner, limit: 9} // the counter and 8 records
	svc := newService(t, st, sequence.Config{})
	q := mustSequence(t, svc, "bind")
	start := make(chan struct{})
	got := make([]uint64, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			writes := 1
			if i == callers/2 {
				writes = 9 // too big on its own
			}
			s, err := q.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
				for w := range writes {
					if err := tx.Put(fmt.Sprintf("rec/%d/%d", i, w), []byte(s.Formatted)); err != nil {
						return err
					}
				}
				return nil
			})
			got[i], errs[i] = s.N, err
		})
	}
	close(start)
	wg.Wait()
	var numbers []uint64
	for i, err := range errs {
		if i == callers/2 {
			assert.ErrorIs(t, err, stores.ErrTooLarge, "the caller whose own writes are too big")
			assert.Zero(t, got[i])
			continue
		}
		if assert.NoError(t, err, "caller %d", i) {
			numbers = append(numbers, got[i])
		}
	}
	requireExactly(t, numbers, callers-1)
	n, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(callers-1), n)
}

// ledgerJournal measures each batch of events as the vault's ledger would
// encode it, and refuses a batch over wire.LedgerMaxBatchBytes as the ledger does.
type ledgerJournal struct {
	mu      sync.Mutex
	largest int // bytes of the largest batch recorded
}

func (j *ledgerJournal) Record(_ context.Context, _ stores.Tx, events []sequence.Event) error {
	size := 0
	for _, e := range events {
		b, err := ledger.Entry{Kind: ledger.NumberAllocated, Time: time.Now(), Series: e.Series, Partition: e.Partition,
			Number: e.Number, From: e.From, RequestID: e.RequestID}.MarshalBinary()
		if err != nil {
			return err
		}
		size += len(b)
	}
	if size > wire.LedgerMaxBatchBytes {
		return fmt.Errorf("%d events, %d bytes: over one ledger append", len(events), size)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.largest = max(j.largest, size)
	return nil
}

// Thousands of concurrent callers queue up on one counter; the batches they
// are combined into are cut so that the events of each fit one ledger
// append, even with the longest series name, partition and request ids
// (on a store with transactions, where any request id is accepted).
func TestBatchesFitOneLedgerAppend(t *testing.T) {
	const callers = 10000
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			j := &ledgerJournal{}
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{Journal: j})
			part := []any{strings.Repeat("p", 250), strings.Repeat("q", 250)}
			q := mustSequence(t, svc, strings.Repeat("s", sequence.MaxSeriesLen), sequence.Options{Partition: part})
			start := make(chan struct{})
			got := make([]uint64, callers)
			var failures atomic.Int64
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					<-start
					var n uint64
					var err error
					if kind.name == "tx" {
						n, err = q.Claim(ctx, fmt.Sprintf("%0*d", sequence.MaxRequestIDLen, i))
					} else {
						n, err = q.Next(ctx) // claim ids are UUIDs there: shorter
					}
					if err != nil && failures.Add(1) <= 3 {
						t.Error(err)
					}
					got[i] = n
				})
			}
			close(start)
			wg.Wait()
			require.Zero(t, failures.Load(), "callers failed")
			requireExactly(t, got, callers)
			t.Logf("largest batch of events: %d bytes", j.largest)
		})
	}
}
