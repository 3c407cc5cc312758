package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
)

// errRollback is what testPins reports.
var errRollback = errors.New("test pins: rollback")

// testPins is an in-memory ledger.Pins for one ledger, like the device's.
type testPins struct {
	mu   sync.Mutex
	seq  uint64
	mac  []byte
	fail error // every raise from now on fails with it (the pin is not durable)
}

func (p *testPins) LedgerPin(string) (uint64, []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seq, p.mac
}

func (p *testPins) CheckLedger(_ string, seq uint64, mac []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq < p.seq || (seq == p.seq && p.seq > 0 && !bytes.Equal(mac, p.mac)) {
		return fmt.Errorf("head %d, pinned %d: %w", seq, p.seq, errRollback)
	}
	return nil
}

func (p *testPins) RaiseLedger(_ string, seq uint64, mac []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq > p.seq {
		p.seq, p.mac = seq, bytes.Clone(mac)
	}
	return p.fail
}

func pinnedLedger(st stores.Store, pins ledger.Pins) *ledger.Ledger {
	return ledger.New(st, newSealer(nil), macer{macKey}, prefix, ledger.Options{
		Actor: "tester",
		Now:   func() time.Time { return fixedNow },
		Pins:  pins,
	})
}

// A walk is checked against the pin it began with: appends of this process
// that raise the pin while a Read runs (past the head the Read took) are no
// rollback.
func TestReadChecksThePinItBeganWith(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		pins := &testPins{}
		l := pinnedLedger(st, pins)
		appendBatches(t, l, 5)
		verifyClean(t, l, 5) // pins entry 5
		n := 0
		for e, err := range l.Read(ctx, 0) {
			require.NoError(t, err, "entry %d", n+1)
			n++
			require.Equal(t, uint64(n), e.Seq)
			if n == 1 {
				_, err := l.Append(ctx, fact(6), fact(7), fact(8))
				require.NoError(t, err)
			}
		}
		assert.Equal(t, 5, n, "the Read ends at the head it began with")
		verifyClean(t, l, 8)
	})
}

// A transaction that reads a snapshot older than a head this device saw
// meanwhile (another ledger handle on the store appended, and a reader of
// this device verified it) is stale, not rolled back: the append is retried
// and succeeds, through Append and through Update alike.
func TestStaleSnapshotIsNotRollback(t *testing.T) {
	paths := map[string]func(ctx context.Context, l *ledger.Ledger, e ledger.Entry) error{
		"append": func(ctx context.Context, l *ledger.Ledger, e ledger.Entry) error {
			_, err := l.Append(ctx, e)
			return err
		},
		"update": func(ctx context.Context, l *ledger.Ledger, e ledger.Entry) error {
			return l.Update(ctx, func(tx stores.Tx) error {
				_, err := l.AppendTx(ctx, tx, e)
				return err
			})
		},
	}
	for name, appendOne := range paths {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, err := badgerstore.Open("", &badgerstore.Options{InMemory: true})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			adv := faultstore.NewAdversary(st)
			pins := &testPins{}
			mine := pinnedLedger(adv.Store(), pins)
			other := newLedger(t, st) // another DB on the same store: its own pins
			require.NoError(t, appendOne(ctx, mine, fact(1)))

			adv.InNextTransaction(func() {
				_, err := other.Append(ctx, fact(2))
				require.NoError(t, err)
				verifyClean(t, mine, 2) // this device now pins entry 2
			})
			require.NoError(t, appendOne(ctx, mine, fact(3)), "a stale snapshot is retried, not a rollback")
			rep := verifyClean(t, mine, 3)
			assert.Equal(t, uint64(3), rep.Head.Seq)
		})
	}
}

// A store that really serves an older ledger is still caught inside a
// transaction, on every store kind: the pin check was moved, not dropped.
func TestRolledBackHeadInTransactionIsRollback(t *testing.T) {
	eachStore(t, func(t *testing.T, st stores.Store) {
		if _, ok := st.(stores.Transactor); !ok || !st.Capabilities().Transactions {
			t.Skip("the check inside a transaction needs a store with transactions")
		}
		ctx := context.Background()
		adv := faultstore.NewAdversary(st)
		pins := &testPins{}
		l := pinnedLedger(adv.Store(), pins)
		appendBatches(t, l, 3)
		snap, err := adv.Snapshot(ctx)
		require.NoError(t, err)
		appendBatches(t, l, 5) // entries 1..5 again as 4..8: pins 8
		require.NoError(t, adv.Restore(ctx, snap, ""))

		_, err = l.Append(ctx, fact(9))
		assert.ErrorIs(t, err, errRollback, "Append")
		err = l.Update(ctx, func(tx stores.Tx) error {
			_, err := l.AppendTx(ctx, tx, fact(9))
			return err
		})
		assert.ErrorIs(t, err, errRollback, "Update")
		_, err = l.Verify(ctx)
		assert.ErrorIs(t, err, errRollback, "Verify")
	})
}

// Many concurrent Append calls are combined into commits that a store can
// carry, even when each entry grows by a long actor as it is built: on a
// store without transactions the head carries a whole group, and must stay
// within stores.MaxValueLen. No caller fails for being one of many.
func TestManyAppendCallersLongActor(t *testing.T) {
	const callers = 6000
	eachStore(t, func(t *testing.T, st stores.Store) {
		ctx := context.Background()
		l := ledger.New(st, newSealer(nil), macer{macKey}, prefix, ledger.Options{
			Actor: strings.Repeat("a", 1000),
			Now:   func() time.Time { return fixedNow },
		})
		start := make(chan struct{})
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				<-start
				_, err := l.Append(ctx, fact(i+1))
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if err != nil {
				if failed < 3 {
					t.Error(err)
				}
				failed++
			}
		}
		require.Zero(t, failed, "callers failed")
		verifyClean(t, l, callers)
	})
}

var errPinDisk = errors.New("test pins: disk gone")

// A pin that could not be made durable: every append and update it covers
// is committed, and its caller gets the error (with the head, for appends),
// alone or combined with others.
func TestUnsavedPinFailsTheCommit(t *testing.T) {
	ctx := context.Background()
	for name, st := range map[string]stores.Store{"tx": memstore.New(), "cas": casOnly(memstore.New())} {
		t.Run(name, func(t *testing.T) {
			pins := &testPins{}
			l := pinnedLedger(st, pins)
			_, err := l.Append(ctx, fact(1))
			require.NoError(t, err)
			pins.mu.Lock()
			pins.fail = errPinDisk
			pins.mu.Unlock()

			h, err := l.Append(ctx, fact(2))
			assert.ErrorIs(t, err, errPinDisk)
			assert.Equal(t, uint64(2), h.Seq, "the committed head comes with the error")
			if name == "tx" {
				err = l.Update(ctx, func(tx stores.Tx) error {
					_, err := l.AppendTx(ctx, tx, fact(3))
					return err
				})
				assert.ErrorIs(t, err, errPinDisk)
			}
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					_, err := l.Append(ctx, fact(4))
					assert.ErrorIs(t, err, errPinDisk)
				})
			}
			wg.Wait()
		})
	}
}
