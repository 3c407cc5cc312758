package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

func TestEmptyLedger(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		h, err := l.Head(context.Background())
		require.NoError(t, err)
		assert.Equal(t, ledger.Head{}, h)
		assert.Empty(t, readAll(t, l, 1))
		verifyClean(t, l, 0)
	})
}

func TestAppendAssignsDensePositions(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		l := newLedger(t, st)
		h1, err := l.Append(ctx, fact(1), fact(2), fact(3))
		require.NoError(t, err)
		assert.Equal(t, uint64(3), h1.Seq)
		h2, err := l.Append(ctx, fact(4))
		require.NoError(t, err)
		assert.Equal(t, uint64(4), h2.Seq)

		head, err := l.Head(ctx)
		require.NoError(t, err)
		assert.True(t, head.Equal(h2), "Head is the last append's head")
		assert.False(t, head.Equal(h1))

		got := readAll(t, l, 0)
		require.Len(t, got, 4)
		for i, e := range got {
			want := fact(i + 1)
			want.Seq = uint64(i + 1)
			want.Time = fixedNow
			want.Actor = "tester"
			assert.Equal(t, want, e)
		}
		verifyClean(t, l, 4)
	})
}

func TestAppendKeepsGivenTimeAndActor(t *testing.T) {
	l := newLedger(t, memstore.New())
	when := time.Date(2001, 2, 3, 4, 5, 6, 7, time.FixedZone("x", 3600))
	in := ledger.Entry{Kind: ledger.SeriesSeeded, Time: when, Actor: "ann", Series: "inv", Partition: []string{"2026", "eu"}, From: 1, Number: 100, Reason: "migration"}
	_, err := l.Append(context.Background(), in)
	require.NoError(t, err)
	got := readAll(t, l, 1)
	require.Len(t, got, 1)
	assert.True(t, got[0].Time.Equal(when))
	assert.Equal(t, time.UTC, got[0].Time.Location())
	assert.Equal(t, "ann", got[0].Actor)
	assert.Equal(t, []string{"2026", "eu"}, got[0].Partition)
	assert.Equal(t, "migration", got[0].Reason)
}

func TestAppendDoesNotModifyCallerSlice(t *testing.T) {
	l := newLedger(t, memstore.New())
	in := []ledger.Entry{fact(1), fact(2)}
	_, err := l.Append(context.Background(), in...)
	require.NoError(t, err)
	assert.Equal(t, []ledger.Entry{fact(1), fact(2)}, in)
}

func TestAppendWithoutEntriesReturnsHead(t *testing.T) {
	l := newLedger(t, memstore.New())
	appendN(t, l, 2)
	h, err := l.Append(context.Background())
	require.NoError(t, err)
	assert.Equal(t, uint64(2), h.Seq)
	verifyClean(t, l, 2)
}

func TestReadFrom(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		appendN(t, l, 25)
		for _, from := range []uint64{1, 2, 9, 10, 11, 24, 25} {
			got := readAll(t, l, from)
			require.Len(t, got, 25-int(from)+1, "from %d", from)
			for i, e := range got {
				assert.Equal(t, from+uint64(i), e.Seq)
			}
		}
		assert.Empty(t, readAll(t, l, 26))
		assert.Empty(t, readAll(t, l, 1000))
	})
}

func TestReadStopsWhenTheLoopBreaks(t *testing.T) {
	l := newLedger(t, memstore.New())
	appendN(t, l, 10)
	n := 0
	for _, err := range l.Read(context.Background(), 1) {
		require.NoError(t, err)
		n++
		if n == 3 {
			break
		}
	}
	assert.Equal(t, 3, n)
}

func TestAppendRejectsInvalidEntries(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		l := newLedger(t, st)
		appendN(t, l, 1)

		_, err := l.Append(ctx, fact(2), ledger.Entry{Kind: 0})
		require.ErrorIs(t, err, ledger.ErrInvalidEntry)
		_, err = l.Append(ctx, ledger.Entry{Kind: ledger.KeysRenewed + 1})
		require.ErrorIs(t, err, ledger.ErrInvalidEntry)
		_, err = l.Append(ctx, ledger.Entry{Kind: ledger.RecordPut, Reason: strings.Repeat("x", 65<<10)})
		require.ErrorIs(t, err, ledger.ErrInvalidEntry)
		_, err = l.Append(ctx, ledger.Entry{Kind: ledger.RecordPut, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
		require.ErrorIs(t, err, ledger.ErrInvalidEntry)

		big := make([]ledger.Entry, 20)
		for i := range big {
			big[i] = ledger.Entry{Kind: ledger.RecordPut, Reason: strings.Repeat("x", 60<<10)}
		}
		_, err = l.Append(ctx, big...)
		require.ErrorIs(t, err, ledger.ErrBatchTooLarge)

		verifyClean(t, l, 1)
	})
}

func TestAppendHonoursContext(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := l.Append(ctx, fact(1))
		require.ErrorIs(t, err, context.Canceled)
		_, err = l.AppendFunc(ctx, func(ledger.Head) ([]ledger.Entry, error) { return []ledger.Entry{fact(1)}, nil })
		require.ErrorIs(t, err, context.Canceled)
		verifyClean(t, l, 0)
	})
}

func TestAppendFuncDerivesFromTheHead(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		l := newLedger(t, st)
		appendN(t, l, 3)
		var seen ledger.Head
		h, err := l.AppendFunc(ctx, func(head ledger.Head) ([]ledger.Entry, error) {
			seen = head
			e := fact(4)
			e.Reason = fmt.Sprint("after ", head.Seq)
			return []ledger.Entry{e}, nil
		})
		require.NoError(t, err)
		assert.Equal(t, uint64(3), seen.Seq)
		assert.Len(t, seen.MAC, 32)
		assert.Equal(t, uint64(4), h.Seq)
		got := readAll(t, l, 4)
		require.Len(t, got, 1)
		assert.Equal(t, "after 3", got[0].Reason)

		// No entries: nothing written, the head comes back.
		h, err = l.AppendFunc(ctx, func(ledger.Head) ([]ledger.Entry, error) { return nil, nil })
		require.NoError(t, err)
		assert.Equal(t, uint64(4), h.Seq)
		verifyClean(t, l, 4)
	})
}

func TestAppendFuncReturnsDeriveErrorUnchanged(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		for _, want := range []error{errors.New("no"), fmt.Errorf("derive: %w", stores.ErrConflict)} {
			calls := 0
			_, err := l.AppendFunc(context.Background(), func(ledger.Head) ([]ledger.Entry, error) {
				calls++
				return nil, want
			})
			assert.Same(t, want, err)
			assert.Equal(t, 1, calls, "a derive error is not retried, even a conflict")
		}
		_, err := l.AppendFunc(context.Background(), func(ledger.Head) ([]ledger.Entry, error) {
			return []ledger.Entry{{}}, nil
		})
		require.ErrorIs(t, err, ledger.ErrInvalidEntry)
		verifyClean(t, l, 0)
	})
}

// TestAppendFuncRederivesOnStaleHead: another writer moves the head while
// derive runs; the fenced append is rejected and derive runs again on the
// fresh head; the first result is never written.
func TestAppendFuncRederivesOnStaleHead(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	st := casOnly(inner)
	l := newLedger(t, st)
	other := newLedger(t, st) // another process on the same store
	appendN(t, l, 2)

	var calls atomic.Int32
	h, err := l.AppendFunc(ctx, func(head ledger.Head) ([]ledger.Entry, error) {
		if calls.Add(1) == 1 {
			_, err := other.Append(ctx, fact(100), fact(101))
			require.NoError(t, err)
		}
		e := fact(3)
		e.Reason = fmt.Sprint("derived from ", head.Seq)
		return []ledger.Entry{e, e}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, int32(2), calls.Load())
	assert.Equal(t, uint64(6), h.Seq)

	got := readAll(t, l, 1)
	require.Len(t, got, 6)
	assert.Equal(t, "inv-100", got[2].ID)
	assert.Equal(t, "inv-101", got[3].ID)
	assert.Equal(t, "derived from 4", got[4].Reason)
	assert.Equal(t, "derived from 4", got[5].Reason)
	verifyClean(t, l, 6)
}

// conflictOnce is a transactional store whose first Update runs fn, then
// lets another writer commit and reports a conflict, as a real store does
// when a transaction loses.
type conflictOnce struct {
	*memstore.Store
	updates  int
	meanwhle func()
}

func (s *conflictOnce) Update(ctx context.Context, fn func(stores.Tx) error) error {
	s.updates++
	if s.updates > 1 {
		return s.Store.Update(ctx, fn)
	}
	abort := errors.New("abort")
	err := s.Store.Update(ctx, func(tx stores.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return abort
	})
	if !errors.Is(err, abort) {
		return err
	}
	s.meanwhle()
	return stores.ErrConflict
}

func TestAppendFuncRederivesOnTransactionConflict(t *testing.T) {
	ctx := context.Background()
	st := &conflictOnce{Store: memstore.New()}
	l := newLedger(t, st)
	other := newLedger(t, st.Store)
	st.meanwhle = func() {
		_, err := other.Append(ctx, fact(100))
		require.NoError(t, err)
	}

	var heads []uint64
	h, err := l.AppendFunc(ctx, func(head ledger.Head) ([]ledger.Entry, error) {
		heads = append(heads, head.Seq)
		e := fact(1)
		e.Reason = fmt.Sprint("derived from ", head.Seq)
		return []ledger.Entry{e}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, []uint64{0, 1}, heads)
	assert.Equal(t, uint64(2), h.Seq)
	got := readAll(t, l, 1)
	require.Len(t, got, 2)
	assert.Equal(t, "inv-100", got[0].ID)
	assert.Equal(t, "derived from 1", got[1].Reason)
	verifyClean(t, l, 2)
}

func TestAppendAfter(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		l := newLedger(t, st)
		h0, err := l.Append(ctx, fact(1))
		require.NoError(t, err)
		h1, err := l.AppendAfter(ctx, h0, fact(2))
		require.NoError(t, err)
		assert.Equal(t, uint64(2), h1.Seq)

		_, err = l.AppendAfter(ctx, h0, fact(3))
		require.ErrorIs(t, err, ledger.ErrStaleHead)
		_, err = l.AppendAfter(ctx, ledger.Head{Seq: 2, MAC: make([]byte, 32)}, fact(3))
		require.ErrorIs(t, err, ledger.ErrStaleHead, "same position, other MAC")
		verifyClean(t, l, 2)
	})
}

func TestAppendTxCommitsWithTheCallersWrites(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	l := newLedger(t, st)
	appendN(t, l, 1)

	err := st.Update(ctx, func(tx stores.Tx) error {
		require.NoError(t, tx.Put(prefix+"invoices/inv-2", []byte("sealed record")))
		h, err := l.AppendTx(ctx, tx, fact(2), fact(3))
		require.NoError(t, err)
		assert.Equal(t, uint64(3), h.Seq)
		return nil
	})
	require.NoError(t, err)
	verifyClean(t, l, 3)

	boom := errors.New("caller fails")
	err = st.Update(ctx, func(tx stores.Tx) error {
		require.NoError(t, tx.Put(prefix+"invoices/inv-4", []byte("sealed record")))
		_, err := l.AppendTx(ctx, tx, fact(4))
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	verifyClean(t, l, 3)
	_, err = st.Get(ctx, prefix+"invoices/inv-4")
	require.ErrorIs(t, err, stores.ErrNotFound)

	_, err = l.AppendTx(ctx, nil, ledger.Entry{})
	require.ErrorIs(t, err, ledger.ErrInvalidEntry)
}

func TestContentionIsBounded(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		always := faultstore.New(st, faultstore.Options{Conflict: 1})
		l := ledger.New(always, newSealer(t), macer{macKey}, prefix, ledger.Options{MaxAttempts: 3})
		_, err := l.Append(context.Background(), fact(1))
		require.ErrorIs(t, err, ledger.ErrContention)
		assert.NotErrorIs(t, err, stores.ErrConflict, "an outer retry loop must not multiply the budget")
		assert.Contains(t, err.Error(), "3 attempts")
		verifyClean(t, newLedger(t, st), 0)
	})
}

// TestEntriesAboveTheHeadAreIgnored: leftovers above the head (from another
// writer, or planted) are not part of the ledger, and the next append
// overwrites them.
func TestEntriesAboveTheHeadAreIgnored(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		appendN(t, l, 3)
		put(t, st, entryKey(4), []byte("junk"))
		put(t, st, entryKey(9), []byte("junk"))
		put(t, st, prefix+"_ledger/not-an-entry", []byte("junk"))
		assert.Len(t, readAll(t, l, 1), 3)
		verifyClean(t, l, 3)

		_, err := l.Append(context.Background(), fact(4))
		require.NoError(t, err)
		assert.Len(t, readAll(t, l, 1), 4)
		verifyClean(t, l, 4)
	})
}

func TestClosedStore(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		appendN(t, l, 2)
		require.NoError(t, st.Close())
		_, err := l.Append(context.Background(), fact(3))
		require.ErrorIs(t, err, stores.ErrClosed)
		_, err = l.Head(context.Background())
		require.ErrorIs(t, err, stores.ErrClosed)
		rep, err := l.Verify(context.Background())
		require.ErrorIs(t, err, stores.ErrClosed)
		assert.Nil(t, rep.Problem, "a store error is not an integrity problem")
		_, err = readErr(l, 1)
		require.ErrorIs(t, err, stores.ErrClosed)
	})
}

func TestKindString(t *testing.T) {
	assert.Equal(t, "record-put", ledger.RecordPut.String())
	assert.Equal(t, "number-assigned", ledger.NumberAssigned.String())
	assert.Equal(t, "kind(0)", ledger.Kind(0).String())
	assert.Equal(t, "app-event", ledger.AppEvent.String())
	assert.True(t, ledger.AppEvent.Valid())
	assert.True(t, ledger.PeriodClosed.Valid())
	assert.Equal(t, "period-closed", ledger.PeriodClosed.String())
	assert.True(t, ledger.SyncConflict.Valid())
	assert.Equal(t, "sync-conflict", ledger.SyncConflict.String())
	assert.Equal(t, "person-granted", ledger.PersonGranted.String())
	assert.Equal(t, "keyring-upgraded", ledger.KeyringUpgraded.String())
	assert.True(t, ledger.KeyringUpgraded.Valid())
	assert.Equal(t, "recovery-codes-revoked", ledger.RecoveryCodesRevoked.String())
	assert.True(t, ledger.RecoveryCodesRevoked.Valid())
	assert.Equal(t, "keys-rotated", ledger.KeysRotated.String())
	assert.True(t, ledger.KeysRotated.Valid())
	assert.Equal(t, "series-bound", ledger.SeriesBound.String())
	assert.True(t, ledger.SeriesBound.Valid())
	assert.Equal(t, "keys-resealed", ledger.KeysResealed.String())
	assert.True(t, ledger.KeysResealed.Valid())
	assert.Equal(t, "keys-renewed", ledger.KeysRenewed.String())
	assert.True(t, ledger.KeysRenewed.Valid())
	assert.False(t, ledger.Kind(24).Valid())
}

// TestVerifyProgressCounts: VerifyProgress reports 1, 2 … n, in order,
// once per entry, on the serial walk and on the parallel one (over
// 4*256 entries), and returns Verify's report.
func TestVerifyProgressCounts(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{5, 1100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			l := newLedger(t, memstore.New())
			for i := 0; i < n; i += 100 {
				var batch []ledger.Entry
				for j := i; j < min(i+100, n); j++ {
					batch = append(batch, fact(j+1))
				}
				_, err := l.Append(ctx, batch...)
				require.NoError(t, err)
			}
			var got []uint64
			rep, err := l.VerifyProgress(ctx, func(entries uint64) { got = append(got, entries) })
			require.NoError(t, err)
			want := make([]uint64, n)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			assert.Equal(t, want, got)
			assert.Equal(t, verifyClean(t, l, uint64(n)), rep)
		})
	}
}
