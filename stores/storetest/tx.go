package storetest

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
)

// errRollback is returned by transaction closures that must roll back.
var errRollback = errors.New("storetest: roll back on purpose")

// Size of the transaction races.
const (
	txWorkers = 16
	txRounds  = 40
)

// snapshot is the committed state of a few keys, to compare before and after.
func snapshot(t testing.TB, st stores.Store) map[string]stores.Item {
	t.Helper()
	m := map[string]stores.Item{}
	for _, it := range list(t, st, "") {
		m[it.Key] = it
	}
	return m
}

func (s suite) testTxCommit(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	vx := put(t, st, "x", []byte("old x"))
	put(t, st, "gone", []byte("to delete"))

	err := tr.Update(ctx, func(tx stores.Tx) error {
		for _, step := range []error{
			tx.Put("a", []byte("A")),
			tx.Put("b", []byte("B")),
			tx.Put("x", []byte("new x")),
			tx.Delete("gone"),
			tx.Delete("never-was"),
		} {
			if step != nil {
				return step
			}
		}
		return nil
	})
	require.NoError(t, err)
	checkItem(t, st, "a", []byte("A"), 0)
	checkItem(t, st, "b", []byte("B"), 0)
	checkItem(t, st, "x", []byte("new x"), 0)
	checkMissing(t, st, "gone")
	checkMissing(t, st, "never-was")
	if it, err := st.Get(ctx, "x"); assert.NoError(t, err) {
		assert.NotEqual(t, vx, it.Version, "a transactional write changes the version")
		_, err := st.CompareAndSwap(ctx, "x", vx, []byte("stale"))
		assert.ErrorIs(t, err, stores.ErrConflict, "the version before the transaction is stale")
	}
	assert.Equal(t, []string{"a", "b", "x"}, keysOf(list(t, st, "")))

	assert.NoError(t, tr.Update(ctx, func(stores.Tx) error { return nil }), "an empty transaction commits")
	assert.Len(t, list(t, st, ""), 3)
}

func (s suite) testTxRollback(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	put(t, st, "x", []byte("old x"))
	put(t, st, "keep", []byte("kept"))
	before := snapshot(t, st)

	err := tr.Update(ctx, func(tx stores.Tx) error {
		assert.NoError(t, tx.Put("a", []byte("A")))
		assert.NoError(t, tx.Put("x", []byte("new x")))
		assert.NoError(t, tx.Delete("keep"))
		return errRollback
	})
	assert.ErrorIs(t, err, errRollback, "Update returns fn's error")
	assert.Equal(t, before, snapshot(t, st), "a failed transaction writes nothing")
	checkMissing(t, st, "a")

	// A transaction that only reads and fails changes nothing either.
	err = tr.Update(ctx, func(tx stores.Tx) error {
		_, err := tx.Get("x")
		assert.NoError(t, err)
		return errRollback
	})
	assert.ErrorIs(t, err, errRollback)
	assert.Equal(t, before, snapshot(t, st))
}

func (s suite) testTxReadOwnWrites(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	vx := put(t, st, "x", []byte("committed x"))

	err := tr.Update(ctx, func(tx stores.Tx) error {
		_, err := tx.Get("a")
		assert.ErrorIs(t, err, stores.ErrNotFound, "Get of a missing key")

		it, err := tx.Get("x")
		if assert.NoError(t, err, "Get of a committed key") {
			assert.Equal(t, "x", it.Key)
			assert.Equal(t, []byte("committed x"), it.Value)
			assert.Equal(t, vx, it.Version, "Get of an unwritten key reports its committed version")
		}

		require.NoError(t, tx.Put("a", []byte("a1")))
		it, err = tx.Get("a")
		if assert.NoError(t, err, "Get after Put") {
			assert.Equal(t, "a", it.Key)
			assert.Equal(t, []byte("a1"), it.Value, "reads see the transaction's own write")
		}
		require.NoError(t, tx.Put("a", []byte("a2")))
		it, err = tx.Get("a")
		if assert.NoError(t, err, "Get after a second Put") {
			assert.Equal(t, []byte("a2"), it.Value)
		}
		require.NoError(t, tx.Delete("a"))
		_, err = tx.Get("a")
		assert.ErrorIs(t, err, stores.ErrNotFound, "Get after Delete")

		require.NoError(t, tx.Delete("x"))
		_, err = tx.Get("x")
		assert.ErrorIs(t, err, stores.ErrNotFound, "Get of a committed key deleted in the transaction")
		require.NoError(t, tx.Put("x", []byte("x again")))
		it, err = tx.Get("x")
		if assert.NoError(t, err) {
			assert.Equal(t, []byte("x again"), it.Value, "Put after Delete")
		}

		return nil
	})
	require.NoError(t, err)
	checkMissing(t, st, "a")
	checkItem(t, st, "x", []byte("x again"), 0)
}

func (s suite) testTxValueNotAliased(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	put(t, st, "c", []byte("committed"))
	err := tr.Update(ctx, func(tx stores.Tx) error {
		buf := []byte("original")
		require.NoError(t, tx.Put("k", buf))
		copy(buf, "CHANGED!")
		it, err := tx.Get("k")
		if assert.NoError(t, err) {
			assert.Equal(t, []byte("original"), it.Value, "Tx.Put keeps its own copy")
			copy(it.Value, "mutated!")
		}
		it, err = tx.Get("k")
		if assert.NoError(t, err) {
			assert.Equal(t, []byte("original"), it.Value, "Tx.Get returns a copy of a pending write")
		}
		it, err = tx.Get("c")
		if assert.NoError(t, err) {
			copy(it.Value, "mutated!")
		}
		return nil
	})
	require.NoError(t, err)
	checkItem(t, st, "k", []byte("original"), 0)
	checkItem(t, st, "c", []byte("committed"), 0)
}

// testTxShared: stores.GetShared and stores.PutShared (through a
// stores.TxSharer or not) read and write like Get and Put: own writes
// first, then committed values, invalid keys and values refused without
// spoiling the transaction, and the writes committed.
func (s suite) testTxShared(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	put(t, st, "c", []byte("committed"))
	err := tr.Update(ctx, func(tx stores.Tx) error {
		it, err := stores.GetShared(tx, "c")
		if assert.NoError(t, err) {
			assert.Equal(t, []byte("committed"), it.Value, "GetShared of a committed key")
			assert.Equal(t, "c", it.Key)
		}
		_, err = stores.GetShared(tx, "missing")
		assert.ErrorIs(t, err, stores.ErrNotFound, "GetShared of a missing key")
		require.NoError(t, stores.PutShared(tx, "k", []byte("shared")))
		require.NoError(t, tx.Put("p", []byte("plain")))
		for key, want := range map[string]string{"k": "shared", "p": "plain"} {
			it, err := stores.GetShared(tx, key)
			if assert.NoError(t, err, "GetShared of a pending write") {
				assert.Equal(t, []byte(want), it.Value, "GetShared of a pending write")
			}
			it, err = tx.Get(key)
			if assert.NoError(t, err) {
				assert.Equal(t, []byte(want), it.Value, "Get of a pending write")
			}
		}
		require.NoError(t, tx.Delete("c"))
		_, err = stores.GetShared(tx, "c")
		assert.ErrorIs(t, err, stores.ErrNotFound, "GetShared of a key deleted in the transaction")
		assert.ErrorIs(t, stores.PutShared(tx, "", []byte("v")), stores.ErrInvalidKey, "PutShared of an empty key")
		_, err = stores.GetShared(tx, "")
		assert.ErrorIs(t, err, stores.ErrInvalidKey, "GetShared of an empty key")
		assert.ErrorIs(t, stores.PutShared(tx, "big", make([]byte, stores.MaxValueLen+1)), stores.ErrTooLarge, "PutShared of a large value")
		return stores.PutShared(tx, "e", []byte{})
	})
	require.NoError(t, err)
	checkItem(t, st, "k", []byte("shared"), 0)
	checkItem(t, st, "p", []byte("plain"), 0)
	checkItem(t, st, "e", []byte{}, 0)
	checkMissing(t, st, "c")
}

func (s suite) testTxBadInput(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	long := strings.Repeat("x", stores.MaxKeyLen+1)
	err := tr.Update(ctx, func(tx stores.Tx) error {
		for _, key := range []string{"", long} {
			_, err := tx.Get(key)
			assert.ErrorIs(t, err, stores.ErrInvalidKey, "Tx.Get of a %d-byte key", len(key))
			assert.ErrorIs(t, tx.Put(key, []byte("v")), stores.ErrInvalidKey, "Tx.Put of a %d-byte key", len(key))
			assert.ErrorIs(t, tx.Delete(key), stores.ErrInvalidKey, "Tx.Delete of a %d-byte key", len(key))
		}
		assert.ErrorIs(t, tx.Put("big", make([]byte, stores.MaxValueLen+1)), stores.ErrTooLarge, "Tx.Put of a large value")
		return tx.Put("ok", []byte("fine"))
	})
	require.NoError(t, err, "rejected calls do not spoil the transaction")
	assert.Equal(t, []string{"ok"}, keysOf(list(t, st, "")))
}

func (s suite) testTxCancelled(t *testing.T) {
	st, tr := s.openTx(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	put(t, st, "x", []byte("old"))
	before := snapshot(t, st)
	err := tr.Update(ctx, func(tx stores.Tx) error {
		assert.NoError(t, tx.Put("x", []byte("new")))
		assert.NoError(t, tx.Put("y", []byte("new")))
		cancel()
		return nil
	})
	assert.ErrorIs(t, err, context.Canceled, "a context cancelled before commit aborts the transaction")
	assert.Equal(t, before, snapshot(t, st), "an aborted transaction writes nothing")
}

// testTxConcurrentWriter lets a plain Put change a key that a running
// transaction has read. The store may refuse the transaction with
// ErrConflict or order the two writers one after the other, but it must not
// commit the transaction on the strength of a value that was overwritten.
func (s suite) testTxConcurrentWriter(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	put(t, st, "k", []byte("0"))

	var read string
	putDone := make(chan error, 1)
	started := false
	err := tr.Update(ctx, func(tx stores.Tx) error {
		it, err := tx.Get("k")
		if err != nil {
			return err
		}
		read = string(it.Value)
		if !started {
			started = true
			go func() {
				_, err := st.Put(ctx, "k", []byte("B"))
				putDone <- err
			}()
			// A store that serializes transactions holds the Put back until
			// Update returns, so wait for it only for a while. The outcome
			// is checked either way; the wait only gives the Put a chance
			// to land inside the transaction on stores that allow it.
			select {
			case err := <-putDone:
				putDone <- err
			case <-time.After(200 * time.Millisecond):
			}
		}
		return tx.Put("k", []byte(read+"A"))
	})
	require.NoError(t, <-putDone, "the concurrent Put")
	final, gerr := st.Get(ctx, "k")
	require.NoError(t, gerr)
	switch {
	case errors.Is(err, stores.ErrConflict):
		assert.Equal(t, "B", string(final.Value), "a conflicting transaction writes nothing")
	case err == nil && read == "0":
		assert.Equal(t, "B", string(final.Value),
			"the transaction read the old value and committed, so the Put must come after it (lost update otherwise)")
	case err == nil && read == "B":
		assert.Equal(t, "BA", string(final.Value), "the transaction read the Put's value")
	default:
		assert.Failf(t, "unexpected outcome", "Update returned %v after reading %q", err, read)
	}
}

// testTxIncrementRace increments one counter from many goroutines with
// read-modify-write transactions, retrying on ErrConflict: no increment may be
// lost and no two committed transactions may have read the same value.
func (s suite) testTxIncrementRace(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	put(t, st, "counter", []byte("0"))
	reads := make([][]int, txWorkers)
	var conflicts atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range txWorkers {
		wg.Go(func() {
			<-start
			for range txRounds {
				for {
					seen := -1
					err := tr.Update(ctx, func(tx stores.Tx) error {
						it, err := tx.Get("counter")
						if err != nil {
							return err
						}
						seen, err = strconv.Atoi(string(it.Value))
						if err != nil {
							return err
						}
						return tx.Put("counter", []byte(strconv.Itoa(seen+1)))
					})
					if errors.Is(err, stores.ErrConflict) {
						conflicts.Add(1)
						runtime.Gosched()
						continue
					}
					if !assert.NoError(t, err) {
						return
					}
					reads[w] = append(reads[w], seen)
					break
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("%d transactions lost a race and were retried", conflicts.Load())
	final, err := st.Get(ctx, "counter")
	require.NoError(t, err)
	total := txWorkers * txRounds
	assert.Equal(t, strconv.Itoa(total), string(final.Value), "no increment was lost")
	all := slices.Concat(reads...)
	slices.Sort(all)
	want := make([]int, total)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, all, "each committed transaction read a different counter value")
}

// testTxTransferRace moves amounts between two keys in transactions while
// read-only transactions check that the total never changes: other
// transactions see all of a commit or none of it.
func (s suite) testTxTransferRace(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	const total = 1000
	put(t, st, "acct/a", []byte(strconv.Itoa(total)))
	put(t, st, "acct/b", []byte("0"))

	read := func(tx stores.Tx) (a, b int, err error) {
		ia, err := tx.Get("acct/a")
		if err != nil {
			return 0, 0, err
		}
		ib, err := tx.Get("acct/b")
		if err != nil {
			return 0, 0, err
		}
		return counter(t, ia.Value), counter(t, ib.Value), nil
	}

	var wg sync.WaitGroup
	for w := range txWorkers / 2 {
		wg.Go(func() {
			for round := range txRounds {
				amount := (w*7+round)%5 + 1
				if round%2 == 1 {
					amount = -amount
				}
				for {
					err := tr.Update(ctx, func(tx stores.Tx) error {
						a, b, err := read(tx)
						if err != nil {
							return err
						}
						if err := tx.Put("acct/a", []byte(strconv.Itoa(a-amount))); err != nil {
							return err
						}
						return tx.Put("acct/b", []byte(strconv.Itoa(b+amount)))
					})
					if errors.Is(err, stores.ErrConflict) {
						runtime.Gosched()
						continue
					}
					assert.NoError(t, err)
					break
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range txRounds {
				err := tr.Update(ctx, func(tx stores.Tx) error {
					a, b, err := read(tx)
					if err != nil {
						return err
					}
					assert.Equal(t, total, a+b, "a transaction saw half of another's commit")
					return errRollback
				})
				if !errors.Is(err, stores.ErrConflict) {
					assert.ErrorIs(t, err, errRollback)
				}
			}
		})
	}
	wg.Wait()
	ia, err := st.Get(ctx, "acct/a")
	require.NoError(t, err)
	ib, err := st.Get(ctx, "acct/b")
	require.NoError(t, err)
	assert.Equal(t, total, counter(t, ia.Value)+counter(t, ib.Value), "the total is unchanged")
}

// testTxPrefetch runs only when the store's Tx implements stores.Prefetcher:
// Prefetch, in any order and with duplicates, changes nothing a Get returns;
// missing keys stay ErrNotFound; writes made after Prefetch, or before a
// second Prefetch of the same keys, are what Get reads and what commits; and
// an invalid key is refused without spoiling the transaction.
func (s suite) testTxPrefetch(t *testing.T) {
	st, tr := s.openTx(t)
	ctx := context.Background()
	prefetches := false
	require.NoError(t, tr.Update(ctx, func(tx stores.Tx) error {
		_, prefetches = tx.(stores.Prefetcher)
		return nil
	}))
	if !prefetches {
		t.Skip("the store's Tx does not implement stores.Prefetcher")
	}
	put(t, st, "a", []byte("A"))
	put(t, st, "c", []byte("C"))
	put(t, st, "gone", []byte("to delete"))
	keys := []string{"c", "b", "a", "gone", "a"}

	type result struct {
		item stores.Item
		err  error
	}
	read := func(tx stores.Tx) []result {
		var rs []result
		for _, key := range keys {
			it, err := tx.Get(key)
			rs = append(rs, result{it, err})
		}
		return rs
	}
	var alone []result
	require.ErrorIs(t, tr.Update(ctx, func(tx stores.Tx) error {
		alone = read(tx)
		return errRollback
	}), errRollback)
	for i, r := range alone {
		if keys[i] == "b" {
			assert.ErrorIs(t, r.err, stores.ErrNotFound, "Get %q alone", keys[i])
		} else {
			assert.NoError(t, r.err, "Get %q alone", keys[i])
		}
	}

	err := tr.Update(ctx, func(tx stores.Tx) error {
		p := tx.(stores.Prefetcher)
		assert.ErrorIs(t, p.Prefetch([]string{"a", ""}), stores.ErrInvalidKey, "Prefetch with an empty key")
		if err := p.Prefetch(keys); err != nil {
			return err
		}
		got := read(tx)
		for i, r := range got {
			assert.Equal(t, alone[i].item, r.item, "Get %q after Prefetch", keys[i])
			if alone[i].err != nil {
				assert.ErrorIs(t, r.err, stores.ErrNotFound, "Get %q after Prefetch", keys[i])
			} else {
				assert.NoError(t, r.err, "Get %q after Prefetch", keys[i])
			}
		}
		for _, step := range []error{
			tx.Put("a", []byte("A2")),
			tx.Put("b", []byte("B")),
			tx.Delete("c"),
			tx.Delete("gone"),
			tx.Put("d", []byte("D")),
			p.Prefetch([]string{"d", "c", "b", "a", "e"}), // keys just written, and a new one
		} {
			if step != nil {
				return step
			}
		}
		for key, want := range map[string]string{"a": "A2", "b": "B", "d": "D"} {
			it, err := tx.Get(key)
			if assert.NoError(t, err, "Get %q after Put and Prefetch", key) {
				assert.Equal(t, want, string(it.Value), "Get %q after Put and Prefetch", key)
			}
		}
		for _, key := range []string{"c", "gone", "e"} {
			_, err := tx.Get(key)
			assert.ErrorIs(t, err, stores.ErrNotFound, "Get %q after Delete and Prefetch", key)
		}
		return nil
	})
	require.NoError(t, err, "the refused Prefetch did not spoil the transaction")
	checkItem(t, st, "a", []byte("A2"), 0)
	checkItem(t, st, "b", []byte("B"), 0)
	checkItem(t, st, "d", []byte("D"), 0)
	checkMissing(t, st, "c")
	checkMissing(t, st, "gone")
	checkMissing(t, st, "e")
	assert.Equal(t, []string{"a", "b", "d"}, keysOf(list(t, st, "")))
}
