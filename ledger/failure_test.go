package ledger_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

var errInjected = errors.New("injected")

// keys lists the keys under the test ledger's directory.
func keys(tb testing.TB, st stores.Store) []string {
	tb.Helper()
	var out []string
	for it, err := range st.List(context.Background(), prefix+"_ledger/") {
		require.NoError(tb, err)
		out = append(out, it.Key)
	}
	return out
}

// failingPut is a transactional store whose transactions fail to Put failKey.
type failingPut struct {
	*memstore.Store
	failKey string
}

type failingTx struct {
	stores.Tx
	failKey string
}

func (s failingPut) Update(ctx context.Context, fn func(stores.Tx) error) error {
	return s.Store.Update(ctx, func(tx stores.Tx) error { return fn(failingTx{tx, s.failKey}) })
}

func (t failingTx) Put(key string, value []byte) error {
	if key == t.failKey {
		return errInjected
	}
	return t.Tx.Put(key, value)
}

func TestBatchFailingMidwayInATransactionLeavesNothing(t *testing.T) {
	inner := memstore.New()
	l := newLedger(t, inner)
	appendN(t, l, 1)
	before := keys(t, inner)

	st := failingPut{Store: inner, failKey: entryKey(4)}
	_, err := newLedger(t, st).Append(context.Background(), fact(2), fact(3), fact(4), fact(5))
	require.ErrorIs(t, err, errInjected)
	assert.Equal(t, before, keys(t, inner))
	verifyClean(t, l, 1)
}

// failingSealer fails its failAt-th Seal.
type failingSealer struct {
	sealer
	calls  atomic.Int32
	failAt int32
}

func (s *failingSealer) Seal(key string, plaintext []byte) ([]byte, error) {
	if s.calls.Add(1) == s.failAt {
		return nil, errInjected
	}
	return s.sealer.Seal(key, plaintext)
}

// TestBatchFailingToSealIsAllOrNothing fails each seal of an append in
// turn: the append either fails and leaves nothing, or (on a store without
// transactions, where entries are copied out of the committed head) succeeds
// whole.
func TestBatchFailingToSealIsAllOrNothing(t *testing.T) {
	for _, cas := range []bool{false, true} {
		// 4 entries and a head: 5 seals.
		for failAt := int32(1); failAt <= 5; failAt++ {
			st := memstore.New()
			l := newLedger(t, st)
			appendN(t, l, 1)
			before := keys(t, st)

			var target stores.Store = st
			if cas {
				target = casOnly(st)
			}
			bad := ledger.New(target, &failingSealer{sealer: newSealer(t), failAt: failAt}, macer{macKey}, prefix, ledger.Options{})
			_, err := bad.Append(context.Background(), fact(2), fact(3), fact(4), fact(5))
			if err != nil {
				require.ErrorIs(t, err, errInjected)
				assert.Equal(t, before, keys(t, st), "seal %d failed", failAt)
				verifyClean(t, l, 1)
			} else {
				verifyClean(t, l, 5)
			}
			if target == stores.Store(st) {
				assert.Error(t, err, "in a transaction every seal is before the commit")
			} else if failAt == 1 {
				assert.Error(t, err, "the head is sealed before the commit")
			}
		}
	}
}

func TestFailedHeadSwapLeavesNothing(t *testing.T) {
	inner := memstore.New()
	l := newLedger(t, inner)
	appendN(t, l, 1)
	before := keys(t, inner)

	st := faultstore.New(inner, faultstore.Options{HideTransactor: true, Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && key == headKey {
			return errInjected
		}
		return nil
	}})
	_, err := newLedger(t, st).Append(context.Background(), fact(2), fact(3), fact(4))
	require.ErrorIs(t, err, errInjected)
	assert.Equal(t, before, keys(t, inner), "nothing is written above the head before the head commits")
	verifyClean(t, l, 1)
}

// TestCommittedBatchSurvivesFailedCopies: on a store without transactions
// the batch is committed with the head; if copying the entries to their own
// keys fails (or the process dies there), readers find them in the head and
// the next append finishes the copy.
func TestCommittedBatchSurvivesFailedCopies(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	var failPuts atomic.Bool
	failPuts.Store(true)
	st := faultstore.New(inner, faultstore.Options{HideTransactor: true, Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpPut && failPuts.Load() {
			return errInjected
		}
		return nil
	}})
	l := newLedger(t, st)
	h, err := l.Append(ctx, fact(1), fact(2), fact(3))
	require.NoError(t, err, "the batch committed with the head")
	assert.Equal(t, uint64(3), h.Seq)
	assert.Equal(t, []string{headKey}, keys(t, inner), "only the head was written")

	got := readAll(t, l, 1)
	require.Len(t, got, 3)
	assert.Equal(t, "inv-3", got[2].ID)
	assert.Len(t, readAll(t, l, 3), 1)
	verifyClean(t, l, 3)
	verifyClean(t, newLedger(t, inner), 3)

	failPuts.Store(false)
	_, err = l.Append(ctx, fact(4))
	require.NoError(t, err)
	assert.Equal(t, []string{entryKey(1), entryKey(2), entryKey(3), entryKey(4), headKey}, keys(t, inner))
	verifyClean(t, l, 4)
}

func TestPendingEntriesAreWrittenOutByATransaction(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	st := faultstore.New(inner, faultstore.Options{HideTransactor: true, Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpPut {
			return errInjected
		}
		return nil
	}})
	_, err := newLedger(t, st).Append(ctx, fact(1), fact(2))
	require.NoError(t, err)

	l := newLedger(t, inner) // the same data, now through transactions
	verifyClean(t, l, 2)
	_, err = l.Append(ctx, fact(3))
	require.NoError(t, err)
	assert.Equal(t, []string{entryKey(1), entryKey(2), entryKey(3), headKey}, keys(t, inner))
	verifyClean(t, l, 3)
}

// TestAmbiguousHeadSwapIsAllOrNothing: the head's compare-and-swap is
// applied but reports an error. The caller cannot tell; the ledger holds
// the whole batch or none of it.
func TestAmbiguousHeadSwapIsAllOrNothing(t *testing.T) {
	inner := memstore.New()
	st := faultstore.New(inner, faultstore.Options{HideTransactor: true, After: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && key == headKey {
			return faultstore.ErrInjectedAfter
		}
		return nil
	}})
	_, err := newLedger(t, st).Append(context.Background(), fact(1), fact(2), fact(3))
	require.ErrorIs(t, err, faultstore.ErrInjectedAfter)
	rep := verifyClean(t, newLedger(t, inner), 3)
	assert.Equal(t, uint64(3), rep.Entries)
}

func TestStoreConflictsAreRetried(t *testing.T) {
	for _, hide := range []bool{false, true} {
		st := faultstore.New(memstore.New(), faultstore.Options{Seed: 7, Conflict: 0.3, HideTransactor: hide})
		l := newLedger(t, st)
		for i := 1; i <= 200; i++ {
			_, err := l.Append(context.Background(), fact(i))
			require.NoError(t, err)
		}
		verifyClean(t, l, 200)
		assert.Positive(t, st.(interface{ Stats() faultstore.Stats }).Stats().Conflicts)
	}
}

func TestReadReportsStoreErrors(t *testing.T) {
	inner := memstore.New()
	appendN(t, newLedger(t, inner), 3)
	st := faultstore.New(inner, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpList || strings.HasSuffix(key, "2") {
			return errInjected
		}
		return nil
	}})
	l := newLedger(t, st)
	_, err := readErr(l, 1)
	require.ErrorIs(t, err, errInjected)
	_, err = readErr(l, 3) // needs entry 2's MAC
	require.ErrorIs(t, err, errInjected)
	rep, err := l.Verify(context.Background())
	require.ErrorIs(t, err, errInjected)
	assert.Nil(t, rep.Problem)
}

// listFails yields the first n items of every List, then errInjected.
type listFails struct {
	stores.Store
	n int
}

func (s listFails) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		i := 0
		for it, err := range s.Store.List(ctx, prefix) {
			if i == s.n {
				yield(stores.Item{}, errInjected)
				return
			}
			i++
			if !yield(it, err) {
				return
			}
		}
	}
}

func TestListFailingMidwayIsAStoreError(t *testing.T) {
	inner := memstore.New()
	l := newLedger(t, inner)
	batch := make([]ledger.Entry, 2000)
	for i := range batch {
		batch[i] = fact(i)
	}
	_, err := l.Append(context.Background(), batch...)
	require.NoError(t, err)

	for _, n := range []int{0, 10, 1500} {
		rep, err := newLedger(t, listFails{inner, n}).Verify(context.Background())
		require.ErrorIs(t, err, errInjected)
		assert.Nil(t, rep.Problem)
		assert.Equal(t, uint64(n), rep.Entries)
	}
}

// panickingSealer panics on its first Seal.
type panickingSealer struct {
	sealer
	done atomic.Bool
}

func (s *panickingSealer) Seal(key string, plaintext []byte) ([]byte, error) {
	if s.done.CompareAndSwap(false, true) {
		panic("sealer bug")
	}
	return s.sealer.Seal(key, plaintext)
}

func TestPanicDuringCommitReleasesTheGroup(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := ledger.New(st, &panickingSealer{sealer: newSealer(t)}, macer{macKey}, prefix, ledger.Options{})
		assert.PanicsWithValue(t, "sealer bug", func() { _, _ = l.Append(context.Background(), fact(1)) })
		h, err := l.Append(context.Background(), fact(2))
		require.NoError(t, err, "the lead was released")
		assert.Equal(t, uint64(1), h.Seq)
		verifyClean(t, newLedger(t, st), 1)
	})
}

func TestDerivePanicPanicsInTheCaller(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		assert.PanicsWithValue(t, "derive bug", func() {
			_, _ = l.AppendFunc(context.Background(), func(ledger.Head) ([]ledger.Entry, error) { panic("derive bug") })
		})
		appendN(t, l, 2)
		verifyClean(t, l, 2)
	})
}
