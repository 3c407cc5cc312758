package ledger_test

import (
	"context"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// checkpointKey is the store key of the test ledger's checkpoint.
const checkpointKey = prefix + "_ledger/checkpoint"

// numberFacts returns what l's summary says of the counter (series,
// partition) and of series.
func numberFacts(tb testing.TB, l *ledger.Ledger, series string, partition ...string) (ledger.CounterFacts, ledger.SeriesFacts, error) {
	tb.Helper()
	var c ledger.CounterFacts
	var s ledger.SeriesFacts
	_, err := l.Facts(context.Background(), ledger.NumberFactsKind, func(f any) error {
		nf := f.(*ledger.NumberFacts)
		c, s = nf.Counter(series, partition), nf.Series(series)
		return nil
	})
	return c, s, err
}

// allocated is a NumberAllocated entry of series' counter.
func allocated(series string, n uint64, partition ...string) ledger.Entry {
	return ledger.Entry{Kind: ledger.NumberAllocated, Series: series, Partition: partition, Number: n}
}

func TestNumberFactsFoldEveryKindOfNumber(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		l := newLedger(t, st)
		_, err := l.Append(ctx,
			allocated("a", 1), allocated("a", 2),
			ledger.Entry{Kind: ledger.SeriesSeeded, Series: "a", From: 2, Number: 10},
			ledger.Entry{Kind: ledger.NumberVoided, Series: "a", Number: 12, Reason: "x"},
			allocated("b", 3, "2026"),
			ledger.Entry{Kind: ledger.PeriodClosed, Series: "b", Partition: []string{"2026"}, Number: 4},
			ledger.Entry{Kind: ledger.RecordPut, Collection: "c", ID: "r", Revision: 1, CipherHash: []byte{1}, Series: "b", Partition: []string{"2027"}, Number: 5},
			ledger.Entry{Kind: ledger.SeriesDefined, Series: "b", Reason: "format"},
			ledger.Entry{Kind: ledger.NumberAssigned, Collection: "c", ID: "r", Series: "p", Number: 7},
			ledger.Entry{Kind: ledger.NumberVoided, Collection: "c", ID: "q", Series: "p", Number: 9, Reason: "gone"},
			ledger.Entry{Kind: ledger.RecordPut, Collection: "c", ID: "s", Revision: 1, CipherHash: []byte{1}},
			ledger.Entry{Kind: ledger.SeriesSeeded, Series: "j", From: 0, Number: 3, Reason: wire.SeedBroughtReason},
		)
		require.NoError(t, err)

		c, s, err := numberFacts(t, l, "a")
		require.NoError(t, err)
		assert.Equal(t, ledger.CounterFacts{Highest: 12}, c)
		assert.Equal(t, ledger.SeriesFacts{}, s)
		c, s, err = numberFacts(t, l, "b", "2026")
		require.NoError(t, err)
		assert.Equal(t, ledger.CounterFacts{Highest: 4, Closed: true}, c)
		assert.Equal(t, ledger.SeriesFacts{Defined: true}, s)
		c, _, err = numberFacts(t, l, "b", "2027")
		require.NoError(t, err)
		assert.Equal(t, ledger.CounterFacts{Highest: 5}, c)
		c, _, err = numberFacts(t, l, "b")
		require.NoError(t, err)
		assert.Equal(t, ledger.CounterFacts{}, c, "the unpartitioned counter is another")
		c, s, err = numberFacts(t, l, "p")
		require.NoError(t, err)
		assert.Equal(t, ledger.CounterFacts{}, c, "a pass's numbers are not the counter's")
		assert.Equal(t, ledger.SeriesFacts{Assigned: 9}, s)
		c, _, err = numberFacts(t, l, "j")
		require.NoError(t, err)
		assert.Equal(t, ledger.CounterFacts{}, c, "numbers a join brought are not held against the counter")
	})
}

// Partition components are told apart by their lengths: ("a\x00b") and
// ("a", "b") are two counters.
func TestNumberFactsKeepPartitionsApart(t *testing.T) {
	ctx := context.Background()
	l := newLedger(t, memstore.New())
	_, err := l.Append(ctx, allocated("s", 1, "a", "b"), allocated("s", 7, "ab"), allocated("s", 9, "a\x00b"))
	require.NoError(t, err)
	for part, want := range map[string]uint64{"a|b": 1, "ab": 7, "a\x00b": 9, "a": 0} {
		c, _, err := numberFacts(t, l, "s", strings.Split(part, "|")...)
		require.NoError(t, err)
		assert.Equal(t, want, c.Highest, "partition %q", part)
	}
}

func TestNumberFactsEncodingRoundTrips(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	l := newLedger(t, st)
	ledger.SetCheckpointEvery(l, 1)
	_, err := l.Append(ctx, allocated("a", 3), allocated("b", 4, "x", "y"),
		ledger.Entry{Kind: ledger.PeriodClosed, Series: "b", Partition: []string{"x", "y"}, Number: 4},
		ledger.Entry{Kind: ledger.SeriesDefined, Series: "b", Reason: "f"},
		ledger.Entry{Kind: ledger.NumberAssigned, Collection: "c", ID: "r", Series: "p", Number: 2})
	require.NoError(t, err)
	_, _, err = numberFacts(t, l, "a") // loads the summary
	require.NoError(t, err)
	require.NoError(t, ledger.Checkpoint(ctx, l))
	require.NoError(t, l.Close())

	// A new ledger reads the checkpoint and nothing after it.
	l2 := newLedger(t, st)
	for _, c := range []struct {
		series  string
		part    []string
		counter ledger.CounterFacts
		series_ ledger.SeriesFacts
	}{
		{"a", nil, ledger.CounterFacts{Highest: 3}, ledger.SeriesFacts{}},
		{"b", []string{"x", "y"}, ledger.CounterFacts{Highest: 4, Closed: true}, ledger.SeriesFacts{Defined: true}},
		{"p", nil, ledger.CounterFacts{}, ledger.SeriesFacts{Assigned: 2}},
	} {
		cf, sf, err := numberFacts(t, l2, c.series, c.part...)
		require.NoError(t, err)
		assert.Equal(t, c.counter, cf, c.series)
		assert.Equal(t, c.series_, sf, c.series)
	}
}

// entryCountingStore counts the ledger entries read from a transactional
// store: each listed or fetched key of a position.
type entryCountingStore struct {
	stores.Store
	tr    stores.Transactor
	reads atomic.Int64
}

func newCounting(inner stores.Store) *entryCountingStore {
	return &entryCountingStore{Store: inner, tr: inner.(stores.Transactor)}
}

func (c *entryCountingStore) count(key string) {
	if rest, ok := strings.CutPrefix(key, prefix+"_ledger/"); ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		c.reads.Add(1)
	}
}

func (c *entryCountingStore) Get(ctx context.Context, key string) (stores.Item, error) {
	c.count(key)
	return c.Store.Get(ctx, key)
}

func (c *entryCountingStore) List(ctx context.Context, p string) iter.Seq2[stores.Item, error] {
	return c.ListAfter(ctx, p, "")
}

func (c *entryCountingStore) ListAfter(ctx context.Context, p, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for it, err := range stores.ListAfter(ctx, c.Store, p, after) {
			if err == nil {
				c.count(it.Key)
			}
			if !yield(it, err) {
				return
			}
		}
	}
}

func (c *entryCountingStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return c.tr.Update(ctx, fn)
}

// A ledger that writes keeps its summary current from its own commits, and
// stores a checkpoint every so many entries: the next ledger on the store
// reads the checkpoint and the entries after it, not the ledger.
func TestCheckpointSparesTheReadOfTheLedger(t *testing.T) {
	ctx := context.Background()
	const every = 16
	st := newCounting(memstore.New())
	l := newLedger(t, st)
	ledger.SetCheckpointEvery(l, every)
	_, _, err := numberFacts(t, l, "a") // loads the (empty) summary
	require.NoError(t, err)
	for i := 1; i <= 300; i++ {
		_, err := l.Append(ctx, allocated("a", uint64(i)))
		require.NoError(t, err)
	}
	ledger.WaitBackground(l) // a checkpoint's catch-up reads what it folds
	st.reads.Store(0)
	c, _, err := numberFacts(t, l, "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(300), c.Highest)
	assert.Zero(t, st.reads.Load(), "entries read by a summary its commits kept current")
	require.NoError(t, l.Close())

	l2 := newLedger(t, st)
	ledger.SetCheckpointEvery(l2, every)
	st.reads.Store(0)
	c, _, err = numberFacts(t, l2, "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(300), c.Highest)
	assert.LessOrEqual(t, st.reads.Load(), int64(every+1), "entries read after a checkpoint")

	// Without the checkpoint, the whole ledger is read, with the same answer.
	_, err = l2.Append(ctx, allocated("a", 301))
	require.NoError(t, err)
	del(t, st, checkpointKey)
	l3 := newLedger(t, st)
	st.reads.Store(0)
	c, _, err = numberFacts(t, l3, "a")
	require.NoError(t, err)
	assert.Equal(t, uint64(301), c.Highest)
	assert.GreaterOrEqual(t, st.reads.Load(), int64(301))
}

// Writers in two processes (two ledgers on one store): each one's summary
// follows the other's commits, and a checkpoint stored by either serves
// both.
func TestFactsFollowOtherWriters(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		a, b := newLedger(t, st), newLedger(t, st)
		ledger.SetCheckpointEvery(a, 8)
		ledger.SetCheckpointEvery(b, 8)
		var wg sync.WaitGroup
		var next atomic.Uint64
		for _, l := range []*ledger.Ledger{a, b, a, b} {
			wg.Go(func() {
				for range 50 {
					if _, err := l.Append(ctx, allocated("s", next.Add(1))); err != nil {
						t.Error(err)
						return
					}
					if _, _, err := numberFacts(t, l, "s"); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, l := range []*ledger.Ledger{a, b, newLedger(t, st)} {
			c, _, err := numberFacts(t, l, "s")
			require.NoError(t, err)
			assert.Equal(t, uint64(200), c.Highest)
		}
	})
}

// What the store does to the checkpoint: deleted or put back older, it
// costs a longer read and gives the same facts; changed, it is ErrTampered;
// left in place while the ledger is rolled back below it, or forked after
// such a rollback, it is ErrRollback.
func TestCheckpointTheStoreMisuses(t *testing.T) {
	ctx := context.Background()
	build := func(t *testing.T) (*faultstore.Adversary, faultstore.Snapshot) {
		adv := faultstore.NewAdversary(memstore.New())
		l := newLedger(t, adv.Store())
		ledger.SetCheckpointEvery(l, 8)
		for i := 1; i <= 20; i++ {
			_, err := l.Append(ctx, allocated("a", uint64(i)))
			require.NoError(t, err)
		}
		_, _, err := numberFacts(t, l, "a")
		require.NoError(t, err)
		require.NoError(t, ledger.Checkpoint(ctx, l))
		snap, err := adv.Snapshot(ctx) // a checkpoint at 20
		require.NoError(t, err)
		for i := 21; i <= 60; i++ {
			_, err := l.Append(ctx, allocated("a", uint64(i)))
			require.NoError(t, err)
		}
		require.NoError(t, l.Close()) // a checkpoint at 60
		return adv, snap
	}
	highest := func(t *testing.T, st stores.Store) (uint64, error) {
		c, _, err := numberFacts(t, newLedger(t, st), "a")
		return c.Highest, err
	}
	t.Run("deleted", func(t *testing.T) {
		adv, _ := build(t)
		require.NoError(t, adv.Drop(ctx, checkpointKey))
		n, err := highest(t, adv.Store())
		require.NoError(t, err)
		assert.Equal(t, uint64(60), n)
	})
	t.Run("older", func(t *testing.T) {
		adv, snap := build(t)
		require.NoError(t, adv.Restore(ctx, snap, checkpointKey))
		n, err := highest(t, adv.Store())
		require.NoError(t, err)
		assert.Equal(t, uint64(60), n)
	})
	t.Run("changed", func(t *testing.T) {
		adv, _ := build(t)
		v := raw(t, adv.Raw(), checkpointKey)
		v[len(v)-1] ^= 1
		require.NoError(t, adv.Set(ctx, checkpointKey, v))
		_, err := highest(t, adv.Store())
		assert.ErrorIs(t, err, ledger.ErrTampered)
		assert.NotErrorIs(t, err, pins.ErrRollback)
	})
	t.Run("from another vault", func(t *testing.T) {
		adv, _ := build(t)
		other := raw(t, adv.Raw(), headKey) // sealed for another key
		require.NoError(t, adv.Set(ctx, checkpointKey, other))
		_, err := highest(t, adv.Store())
		assert.ErrorIs(t, err, ledger.ErrTampered)
	})
	t.Run("ledger rolled back below it", func(t *testing.T) {
		adv, snap := build(t)
		require.NoError(t, adv.Restore(ctx, snap, prefix+"_ledger/0"))
		require.NoError(t, adv.Restore(ctx, snap, headKey))
		_, err := highest(t, adv.Store())
		assert.ErrorIs(t, err, pins.ErrRollback)
	})
	t.Run("ledger rolled back and forked past it", func(t *testing.T) {
		adv, snap := build(t)
		require.NoError(t, adv.Restore(ctx, snap, prefix+"_ledger/0"))
		require.NoError(t, adv.Restore(ctx, snap, headKey))
		// Another history from 21 on, past the checkpoint's 60.
		w := newLedger(t, adv.Store())
		for i := 21; i <= 70; i++ {
			_, err := w.Append(ctx, allocated("a", uint64(1000+i)))
			require.NoError(t, err)
		}
		_, err := highest(t, adv.Store())
		assert.ErrorIs(t, err, pins.ErrRollback)
	})
}

// Queries and commits at once, from several goroutines and two ledgers on
// one store: every query answers at least what was committed before it
// began, and at the end every ledger answers the highest number.
func TestFactsUnderConcurrentCommits(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		ls := []*ledger.Ledger{newLedger(t, st), newLedger(t, st)}
		for _, l := range ls {
			ledger.SetCheckpointEvery(l, 4)
		}
		var committed atomic.Uint64 // a lower bound of the highest number committed
		var wg sync.WaitGroup
		for g := range 6 {
			l := ls[g%2]
			wg.Go(func() {
				for i := range 40 {
					n := uint64(g*1000 + i + 1)
					if _, err := l.Append(ctx, allocated("s", n)); err != nil {
						t.Error(err)
						return
					}
					for {
						old := committed.Load()
						if n <= old || committed.CompareAndSwap(old, n) {
							break
						}
					}
					floor := committed.Load()
					c, _, err := numberFacts(t, l, "s")
					if err != nil {
						t.Error(err)
						return
					}
					if c.Highest < floor {
						t.Errorf("facts say %d, after %d committed", c.Highest, floor)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, l := range ls {
			c, _, err := numberFacts(t, l, "s")
			require.NoError(t, err)
			assert.Equal(t, uint64(5040), c.Highest)
		}
	})
}
