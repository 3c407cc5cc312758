package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A batch whose commit reports an error after the store applied it (the
// ambiguous outcome: a connection lost during COMMIT) must not be run
// again in halves: the halves append the same entries a second time, and
// their callers are told that their one append succeeded.
func TestAmbiguousCommitIsNotSplit(t *testing.T) {
	var updates atomic.Int64
	st := faultstore.New(memstore.New(), faultstore.Options{
		After: func(op faultstore.Op, _ string) error {
			if op == faultstore.OpUpdate && updates.Add(1) == 2 {
				return faultstore.ErrInjectedAfter // the batch's commit: applied, reported failed
			}
			return nil
		},
	})
	l := newLedger(t, st)
	ctx := context.Background()

	const n = 4
	errs := runTogether(t, l, n, nil, func(i int) error { // its hold is update 1
		_, err := l.Append(ctx, fact(i+1))
		return err
	})

	seen := map[string]int{}
	for _, e := range readAll(t, l, 1) {
		seen[e.RequestID]++
	}
	for i := range n {
		id := fact(i + 1).RequestID
		assert.LessOrEqual(t, seen[id], 1, "append %d is in the ledger %d times", i+1, seen[id])
		if errs[i] == nil {
			assert.Equal(t, 1, seen[id], "append %d succeeded: its entry is in the ledger once", i+1)
		}
	}
	rep, err := l.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, rep.OK())
}

// spoilingStore's transactions behave like PostgreSQL's: a read of the key
// "spoil" fails on the server, and then every later call of the
// transaction fails with that error, and Update returns it without
// committing.
type spoilingStore struct {
	stores.Store
	tr stores.Transactor
}

var errSpoiled = errors.New("statement failed: transaction aborted")

func (s spoilingStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	st := &spoilingTx{}
	return s.tr.Update(ctx, func(tx stores.Tx) error {
		st.Tx = tx
		if err := fn(st); err != nil {
			return err
		}
		return st.err
	})
}

type spoilingTx struct {
	stores.Tx
	err error
}

func (t *spoilingTx) Get(key string) (stores.Item, error) {
	if t.err == nil && key == "spoil" {
		t.err = errSpoiled
	}
	if t.err != nil {
		return stores.Item{}, t.err
	}
	return t.Tx.Get(key)
}

func (t *spoilingTx) Put(key string, value []byte) error {
	if t.err != nil {
		return t.err
	}
	return t.Tx.Put(key, value)
}

// A closure whose read spoils the batch's transaction fails alone: the
// closures after it, whose reads failed only because of it, are run again
// without it and succeed. (The counterpart of TestAmbiguousCommitIsNotSplit:
// a batch refused before its commit is still split.)
func TestSpoiledBatchIsStillSplit(t *testing.T) {
	mem := memstore.New()
	l := newLedger(t, spoilingStore{Store: mem, tr: mem})
	ctx := context.Background()
	release, held := holdQueue(t, l)

	var wg sync.WaitGroup
	var errSpoiler, errReader error
	wg.Go(func() {
		errSpoiler = l.Update(ctx, func(tx stores.Tx) error {
			_, err := tx.Get("spoil")
			return err
		})
	})
	waitQueued(l, 1)
	wg.Go(func() {
		errReader = l.Update(ctx, func(tx stores.Tx) error {
			_, err := tx.Get("other")
			if errors.Is(err, stores.ErrNotFound) {
				return nil
			}
			return err
		})
	})
	waitQueued(l, 2)
	release()
	require.NoError(t, <-held)
	wg.Wait()
	assert.ErrorIs(t, errSpoiler, errSpoiled)
	assert.NoError(t, errReader, "a closure is not failed by another closure's failed statement")
}

// The same ambiguous commit with closures that take numbers the way a
// sequence counter does (read the counter, write it one higher, append an
// allocation): run again in halves, each closure takes a second number,
// and the first one, committed with its allocation entry, is given to
// nobody: a number skipped.
func TestAmbiguousCommitSkipsNoNumber(t *testing.T) {
	var updates atomic.Int64
	st := faultstore.New(memstore.New(), faultstore.Options{
		After: func(op faultstore.Op, _ string) error {
			if op == faultstore.OpUpdate && updates.Add(1) == 2 {
				return faultstore.ErrInjectedAfter
			}
			return nil
		},
	})
	l := newLedger(t, st)
	ctx := context.Background()
	take := func(counter string, got *uint64) func(tx stores.Tx) error {
		return func(tx stores.Tx) error {
			var n uint64
			if it, err := tx.Get(counter); err == nil {
				n = uint64(it.Value[0])
			} else if !errors.Is(err, stores.ErrNotFound) {
				return err
			}
			n++
			if err := tx.Put(counter, []byte{byte(n)}); err != nil {
				return err
			}
			if _, err := l.AppendTx(ctx, tx, ledger.Entry{Kind: ledger.NumberAllocated, Series: counter, Number: n}); err != nil {
				return err
			}
			*got = n
			return nil
		}
	}
	counters := []string{"a", "b"}
	got := make([]uint64, len(counters))
	errs := runTogether(t, l, len(counters), nil, func(i int) error { // its hold is update 1
		return l.Update(ctx, take(counters[i], &got[i]))
	})

	allocated := map[string][]uint64{}
	for _, e := range readAll(t, l, 1) {
		if e.Kind == ledger.NumberAllocated {
			allocated[e.Series] = append(allocated[e.Series], e.Number)
		}
	}
	for i, c := range counters {
		assert.LessOrEqual(t, len(allocated[c]), 1, "series %s: one closure took its numbers %v", c, allocated[c])
		if errs[i] != nil {
			continue // the ambiguous outcome, reported: the caller knows
		}
		assert.Equal(t, []uint64{got[i]}, allocated[c], "series %s: the one number its caller got, and no other", c)
	}
}
