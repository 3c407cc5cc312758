package sequence_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// The hooks a vault's transaction calls (vault/tx.go).
var (
	seqTarget = wire.SequenceTarget.(func(*sequence.Sequence) *sequence.Sequence)
	seqNextTx = wire.SequenceNextTx.(func(context.Context, *sequence.Sequence, stores.Tx, *uint64, bool) (sequence.Serial, bool, error))
)

// deadlockAfter bounds the waits of the lock-order tests: well past
// anything these few in-memory operations take, so that reaching it means
// the goroutines wait for each other.
const deadlockAfter = 20 * time.Second

// The code a vault's transaction runs (tx.Next: the counter's target, then
// the number) must not wait for a lock that is held across a store read: on
// memstore a transaction holds the store's lock, so that read waits for the
// transaction. Here a handle defining the series holds the series' lock
// while it asks the history (which reads the store) whether a definition is
// recorded, and that read is made to begin inside another goroutine's
// transaction, which then resolves two handles of the same series whose
// views are not built yet: one without definition and one defining it. The
// transaction ends and each goroutine gets its outcome.
func TestTxDoesNotWaitForTheDefinitionLoad(t *testing.T) {
	ctx := context.Background()
	mem := newMem()
	var (
		armed         sync.Once
		arm           = make(chan struct{})
		historyBegins = make(chan struct{})
	)
	fs := faultstore.New(mem, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		select {
		case <-arm:
			if op == faultstore.OpList && key == stubDir {
				armed.Do(func() { close(historyBegins) })
			}
		default:
		}
		return nil
	}})
	l := &ledgerStub{st: fs}
	// Not closed on failure: a transaction left waiting holds the lock
	// Close takes.
	svc := stubService(t, fs, l)

	// The series has no definition, and this Service has loaded that.
	plain := mustSequence(t, svc, "inv")
	d, err := plain.Definition(ctx)
	require.NoError(t, err)
	require.True(t, d.IsZero())
	want := sequence.Definition{Format: "INV-{seq}"}
	definer := mustSequence(t, svc, "inv", sequence.Options{Format: want.Format})
	fresh := mustSequence(t, svc, "inv")                                        // no view yet
	other := mustSequence(t, svc, "inv", sequence.Options{Format: want.Format}) // no view yet
	close(arm)

	wait, cancel := context.WithTimeout(ctx, deadlockAfter)
	defer cancel()
	inTx := make(chan struct{})
	type txOutcome struct {
		fresh, other *sequence.Sequence
		check        []bool
		err          error
	}
	txDone := make(chan txOutcome, 1)
	go func() {
		var out txOutcome
		out.err = fs.(stores.Transactor).Update(ctx, func(tx stores.Tx) error {
			close(inTx)
			select {
			case <-historyBegins:
			case <-wait.Done():
				return wait.Err()
			}
			out.fresh, out.other = seqTarget(fresh), seqTarget(other)
			for _, q := range []*sequence.Sequence{fresh, other} {
				_, check, err := seqNextTx(ctx, q, tx, nil, false)
				if err != nil {
					return err
				}
				out.check = append(out.check, check)
			}
			return nil
		})
		txDone <- out
	}()
	<-inTx
	type defOutcome struct {
		d   sequence.Definition
		err error
	}
	defDone := make(chan defOutcome, 1)
	go func() {
		d, err := definer.Definition(ctx) // holds the series' lock across its read of the history
		defDone <- defOutcome{d, err}
	}()

	var tx txOutcome
	select {
	case tx = <-txDone:
	case <-wait.Done():
		t.Fatalf("deadlock: the transaction waited %v for a lock held across a read of the store", deadlockAfter)
	}
	require.NoError(t, tx.err)
	assert.Same(t, fresh, tx.fresh, "no periods: a handle is its own target")
	assert.Same(t, other, tx.other, "not loaded for a definer: resolved by the check, outside the transaction")
	// Neither counter was checked against the history yet: both are
	// asked for the check, outside the transaction.
	assert.Equal(t, []bool{true, true}, tx.check)

	var def defOutcome
	select {
	case def = <-defDone:
	case <-wait.Done():
		t.Fatalf("deadlock: the definition's load waited %v", deadlockAfter)
	}
	require.NoError(t, def.err)
	assert.Equal(t, want, def.d)
	// The other handles see the definition the first one gives the series.
	for _, q := range []*sequence.Sequence{fresh, other, plain} {
		d, err := q.Definition(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, d)
	}
	require.NoError(t, fs.Close())
}

// openHook is a Sealer that calls hook before each Open.
type openHook struct {
	sequence.Sealer
	hook func(key string)
}

func (s openHook) Open(key string, sealed []byte) ([]byte, error) {
	s.hook(key)
	return s.Sealer.Open(key, sealed)
}

// A counter's view of the History must not be locked across a read of it:
// a Claim's transaction looks its request id up in that view (findClaim),
// and on memstore the read waits for the transaction. Here a Void of a
// number another Service took catches the view up, and its read of the
// History is made to begin inside the transaction of a Claim on the same
// counter, which then looks its missing claim record up in the view. Both
// end: the claim gets the next number and the void is written.
func TestClaimTxDoesNotWaitForAViewCatchUp(t *testing.T) {
	ctx := context.Background()
	mem := newMem()
	var (
		armed    atomic.Bool // the Void holds the view, or used to
		txBegun  atomic.Bool // the Claim's transaction was entered
		signal   sync.Once
		inTx     = make(chan struct{}) // the Claim's transaction holds the store
		reading  = make(chan struct{}) // the Void's catch-up began its read
		readOnce sync.Once
	)
	wait, cancel := context.WithTimeout(ctx, deadlockAfter)
	defer cancel()
	fs := faultstore.New(mem, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if !armed.Load() {
			return nil
		}
		switch {
		case op == faultstore.OpList && key == stubDir:
			readOnce.Do(func() { close(reading) })
			select { // the read begins inside the Claim's transaction
			case <-inTx:
			case <-wait.Done():
				return wait.Err()
			}
		case op == faultstore.OpUpdate:
			txBegun.Store(true)
		}
		return nil
	}})
	l := &ledgerStub{st: fs, sealer: openHook{Sealer: newSealer(), hook: func(string) {
		// The first Open after the Update began is the Claim's read of its
		// counter (moved by the other Service), inside the transaction.
		if txBegun.Load() {
			signal.Do(func() { close(inTx) })
		}
	}}}
	// Not closed on failure: a transaction left waiting holds the lock
	// Close takes.
	svc := stubService(t, fs, l)
	q := mustSequence(t, svc, "inv")
	n, err := q.Claim(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
	// Another Service takes 2: this one's view of the History is behind.
	n, err = mustSequence(t, stubService(t, fs, l), "inv").Next(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), n)
	armed.Store(true)

	voidDone := make(chan error, 1)
	go func() { voidDone <- q.Void(ctx, 2, "spoiled") }() // catches the view up: reads the History
	select {
	case <-reading:
	case <-wait.Done():
		t.Fatalf("the void did not read the history within %v", deadlockAfter)
	}
	type claimOutcome struct {
		n   uint64
		err error
	}
	claimDone := make(chan claimOutcome, 1)
	go func() {
		n, err := q.Claim(ctx, "b") // its record is missing: looked up in the view
		claimDone <- claimOutcome{n, err}
	}()

	var claim claimOutcome
	select {
	case claim = <-claimDone:
	case <-wait.Done():
		t.Fatalf("deadlock: the claim's transaction waited %v for the view, locked across a read of the store", deadlockAfter)
	}
	require.NoError(t, claim.err)
	assert.Equal(t, uint64(3), claim.n)
	select {
	case err = <-voidDone:
	case <-wait.Done():
		t.Fatalf("deadlock: the void waited %v", deadlockAfter)
	}
	require.NoError(t, err)
	armed.Store(false)

	reason, voided, err := q.Voided(ctx, 2)
	require.NoError(t, err)
	assert.True(t, voided)
	assert.Equal(t, "spoiled", reason)
	n, err = q.Claim(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), n, "a retry gets its number")
	n, err = q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), n, "no gap, no duplicate")
	require.NoError(t, fs.Close())
}
