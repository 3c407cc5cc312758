package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// hammer runs writers goroutines, each appending perWriter single-entry
// facts through ledgers[w%len(ledgers)], and checks that the ledger is dense
// from 1, verifies, and holds every appended entry exactly once, at the
// position its Append returned.
func hammer(t *testing.T, ledgers []*ledger.Ledger, writers, perWriter int) {
	t.Helper()
	ctx := context.Background()
	type ack struct {
		seq uint64
		id  string
	}
	acks := make([][]ack, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			l := ledgers[w%len(ledgers)]
			for i := range perWriter {
				e := fact(i)
				e.RequestID = fmt.Sprintf("w%d-%d", w, i)
				h, err := l.Append(ctx, e)
				if err != nil {
					errs[w] = err
					return
				}
				acks[w] = append(acks[w], ack{h.Seq, e.RequestID})
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	total := uint64(writers * perWriter)
	verifyClean(t, ledgers[0], total)
	bySeq := make(map[uint64]string, total)
	seen := make(map[string]int, total)
	next := uint64(1)
	for e, err := range ledgers[0].Read(ctx, 1) {
		require.NoError(t, err)
		require.Equal(t, next, e.Seq)
		next++
		bySeq[e.Seq] = e.RequestID
		seen[e.RequestID]++
	}
	require.Len(t, bySeq, int(total))
	// Plain comparisons in the loop: 16,000 testify calls would dominate the test.
	var wrong, dup, disorder int
	for _, as := range acks {
		var last uint64
		for _, a := range as {
			if bySeq[a.seq] != a.id {
				wrong++
			}
			if seen[a.id] != 1 {
				dup++
			}
			if a.seq <= last {
				disorder++
			}
			last = a.seq
		}
	}
	assert.Zero(t, wrong, "acknowledged positions holding another entry")
	assert.Zero(t, dup, "entries not present exactly once")
	assert.Zero(t, disorder, "a writer's entries out of its order")
}

// TestConcurrentAppends: 16 appenders × 1,000 entries on one Ledger.
func TestConcurrentAppends(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		hammer(t, []*ledger.Ledger{newLedger(t, st)}, 16, 1000)
	})
}

// TestConcurrentLedgers: 16 appenders spread over 4 Ledgers on one store,
// as 4 processes sharing a store would be: they contend through the store's
// transactions or compare-and-swap. (badger is for one process, whose
// writers share one Ledger, so it is not in this test.)
func TestConcurrentLedgers(t *testing.T) {
	for _, k := range storeKinds[:2] {
		t.Run(k.name, func(t *testing.T) {
			st := k.make()
			ls := make([]*ledger.Ledger, 4)
			for i := range ls {
				// Writers of one Ledger share commits; the 4 Ledgers race
				// as processes do, with a retry budget. The budget's end
				// (ErrContention) is tested elsewhere: here it is set high
				// enough that 4 racers on 2 cores never reach it, so the
				// test checks the positions, not the budget.
				ls[i] = ledger.New(st, newSealer(nil), macer{macKey}, prefix, ledger.Options{
					Actor:       "tester",
					Now:         func() time.Time { return fixedNow },
					MaxAttempts: 256,
				})
			}
			hammer(t, ls, 16, 250)
		})
	}
}

// TestConcurrentUpdates: transactions that write a record and its entry,
// through Update, run alongside Appends without conflicting on the head,
// even on badger, whose transactions are optimistic.
func TestConcurrentUpdates(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		l := newLedger(t, st)
		if _, ok := st.(stores.Transactor); !ok || !st.Capabilities().Transactions {
			require.ErrorIs(t, l.Update(ctx, func(stores.Tx) error { return nil }), stores.ErrNotSupported)
			return
		}
		const writers, each = 8, 100
		errs := make([]error, 2*writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					id := fmt.Sprintf("w%d-%d", w, i)
					err := l.Update(ctx, func(tx stores.Tx) error {
						if err := tx.Put(prefix+"invoices/"+id, []byte("sealed")); err != nil {
							return err
						}
						_, err := l.AppendTx(ctx, tx, ledger.Entry{Kind: ledger.RecordPut, Collection: "invoices", ID: id})
						return err
					})
					if err != nil {
						errs[w] = err
						return
					}
				}
			})
			wg.Go(func() {
				for i := range each {
					if _, err := l.Append(ctx, fact(i)); err != nil {
						errs[writers+w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		verifyClean(t, l, 2*writers*each)
		records := 0
		for _, e := range readAll(t, l, 1) {
			if e.Collection == "invoices" && e.ID[0] == 'w' {
				_, err := st.Get(ctx, prefix+"invoices/"+e.ID)
				require.NoError(t, err)
				records++
			}
		}
		assert.Equal(t, writers*each, records)

		boom := errors.New("caller fails")
		err := l.Update(ctx, func(tx stores.Tx) error {
			_, err := l.AppendTx(ctx, tx, fact(1))
			require.NoError(t, err)
			return boom
		})
		assert.Same(t, boom, err)
		verifyClean(t, l, 2*writers*each)
	})
}

// TestConcurrentAppendFuncs: fenced appends from many goroutines each see
// the head they are appended after.
func TestConcurrentAppendFuncs(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		ls := []*ledger.Ledger{newLedger(t, st), newLedger(t, st)}
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for w := range 8 {
			wg.Go(func() {
				for range 50 {
					_, err := ls[w%2].AppendFunc(ctx, func(h ledger.Head) ([]ledger.Entry, error) {
						return []ledger.Entry{{Kind: ledger.NumberAllocated, Number: h.Seq + 1}, {Kind: ledger.NumberAllocated, Number: h.Seq + 2}}, nil
					})
					if err != nil {
						errs[w] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		for _, e := range readAll(t, ls[0], 1) {
			assert.Equal(t, e.Seq, e.Number, "derived from the head it follows")
		}
		verifyClean(t, ls[0], 800)
	})
}

// TestCancelledWaitersLeaveTheGroup: Append calls whose context ends while
// they wait for the group commit return the context's error or their
// result, and the ledger stays consistent with what they were told.
func TestCancelledWaitersLeaveTheGroup(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		l := newLedger(t, st)
		var wg sync.WaitGroup
		var mu sync.Mutex
		acked := map[string]uint64{}
		for w := range 16 {
			wg.Go(func() {
				for i := range 100 {
					ctx, cancel := context.WithCancel(context.Background())
					if i%3 == 0 {
						cancel()
					}
					e := fact(i)
					e.RequestID = fmt.Sprintf("w%d-%d", w, i)
					h, err := l.Append(ctx, e)
					cancel()
					if err == nil {
						mu.Lock()
						acked[e.RequestID] = h.Seq
						mu.Unlock()
					} else {
						assert.ErrorIs(t, err, context.Canceled)
					}
				}
			})
		}
		wg.Wait()
		rep, err := l.Verify(context.Background())
		require.NoError(t, err)
		found := map[string]uint64{}
		for _, e := range readAll(t, l, 1) {
			found[e.RequestID] = e.Seq
		}
		for id, seq := range acked {
			assert.Equal(t, seq, found[id], id)
		}
		assert.Equal(t, int(rep.Entries), len(found))
	})
}
