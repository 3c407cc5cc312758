package ledger

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// gateHold is a cas.Hold that passes when over is closed; Await reports
// each wait on waiting.
type gateHold struct {
	over    chan struct{}
	waiting chan<- struct{}
}

func (h gateHold) Error() string { return "held: " + stores.ErrConflict.Error() }
func (h gateHold) Unwrap() error { return stores.ErrConflict }
func (h gateHold) Await(ctx context.Context) error {
	select {
	case h.waiting <- struct{}{}:
	default:
	}
	select {
	case <-h.over:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestGuardHoldWaitsOutsideTheCommit: while the guard holds commits back
// (a cas.Hold), appends and updates wait for it, however many times the
// guard was asked, with a retry budget of one attempt: the wait is not a
// retry. Once it passes, every call commits, once, on a store with
// transactions and on one with compare-and-swap only.
func TestGuardHoldWaitsOutsideTheCommit(t *testing.T) {
	for name, mk := range map[string]func() stores.Store{
		"tx":  func() stores.Store { return memstore.New() },
		"cas": func() stores.Store { return faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true}) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := mk()
			var holding atomic.Bool
			holding.Store(true)
			waiting := make(chan struct{}, 1)
			h := gateHold{over: make(chan struct{}), waiting: waiting}
			var asked atomic.Int64
			l := newLedger(st, plainSealer{}, hmacMACer{key: []byte("mac key of the hold test........")}, "v/t/", wire.LedgerOptions{
				Actor: "olga", MaxAttempts: 1,
				Guard: func(func(string) (stores.Item, error)) error {
					asked.Add(1)
					if holding.Load() {
						return fmt.Errorf("guard: %w", h)
					}
					return nil
				},
			})
			_, tx := st.(stores.Transactor)
			const n = 6
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					if tx && i%2 == 1 {
						errs <- l.Update(ctx, func(tx stores.Tx) error {
							_, err := l.AppendTx(ctx, tx, Entry{Kind: AppEvent, Reason: fmt.Sprint("update ", i)})
							return err
						})
						return
					}
					_, err := l.Append(ctx, Entry{Kind: AppEvent, Reason: fmt.Sprint("append ", i)})
					errs <- err
				})
			}
			ended := make(chan struct{})
			go func() { wg.Wait(); close(ended) }()
			select {
			case <-waiting:
				head, err := l.Head(ctx)
				require.NoError(t, err)
				assert.Zero(t, head.Seq, "nothing committed while held")
			case <-ended:
				t.Error("the calls ended without waiting for the hold")
			}
			holding.Store(false)
			close(h.over)
			wg.Wait()
			close(errs)
			for err := range errs {
				assert.NoError(t, err)
			}
			rep, err := l.Verify(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(n), rep.Entries, "each call committed once")
			assert.Positive(t, asked.Load())
		})
	}
}
