package sequence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Two Services on one store sharing one set of pins (two DBs on one state
// folder): the counter moved by the other one is not a rollback, on the
// compare-and-swap path (whose cache was written before the other's pin)
// and on the transaction path.
func TestSharedPinsAreNotRollback(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		hideTx  bool
		journal bool
	}{
		{"cas", true, false},
		{"cas-journal", true, true},
		{"tx-journal", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := faultstore.New(newMem(), faultstore.Options{HideTransactor: tc.hideTx})
			t.Cleanup(func() { _ = st.Close() })
			shared, sealer := &counterPins{}, newSealer()
			cfg := func() sequence.Config {
				c := sequence.Config{Pins: shared}
				if tc.journal {
					c.Journal = &journal{}
				}
				return c
			}
			a := mustSequence(t, sequence.NewService(st, sealer, "v/", cfg()), "inv")
			b := mustSequence(t, sequence.NewService(st, sealer, "v/", cfg()), "inv")

			var got []uint64
			for range 20 {
				for _, q := range []*sequence.Sequence{a, b} {
					n, err := q.Next(ctx)
					require.NoError(t, err)
					got = append(got, n)
				}
			}
			assert.Equal(t, uint64(40), got[len(got)-1])

			// And racing each other.
			var mu sync.Mutex
			var wg sync.WaitGroup
			errs := 0
			for g := range 8 {
				q := []*sequence.Sequence{a, b}[g%2]
				wg.Go(func() {
					for range 25 {
						n, err := q.Next(ctx)
						mu.Lock()
						if err != nil {
							errs++
						} else {
							got = append(got, n)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			assert.Zero(t, errs)
			requireExactly(t, got, 240)
		})
	}
}

// raiseFailing is a sequence.Pins whose raises fail once told to.
type raiseFailing struct {
	counterPins
	mu   sync.Mutex
	fail error
}

func (p *raiseFailing) RaiseCounter(key string, value uint64) error {
	if err := p.counterPins.RaiseCounter(key, value); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fail
}

var errPinDisk = errors.New("test pins: disk gone")

// A pin that could not be made durable fails every caller of the batch it
// covers, with the number the caller took: no caller takes a number it
// believes protected.
func TestUnsavedPinFailsTheBatch(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			fp := &raiseFailing{}
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{Pins: fp, Journal: &journal{}})
			q := mustSequence(t, svc, "inv", sequence.Options{Format: "INV-{seq:03}"})
			n, err := q.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(1), n)

			fp.mu.Lock()
			fp.fail = errPinDisk
			fp.mu.Unlock()
			n, err = q.Next(ctx)
			assert.ErrorIs(t, err, errPinDisk)
			assert.Equal(t, uint64(2), n, "the number taken comes with the error")
			s, err := q.NextSerial(ctx)
			assert.ErrorIs(t, err, errPinDisk)
			assert.Equal(t, uint64(3), s.N)
			n, err = q.Claim(ctx, sequence.NewRequestID())
			assert.ErrorIs(t, err, errPinDisk)
			assert.Equal(t, uint64(4), n)
			assert.ErrorIs(t, q.SeedTo(ctx, 10), errPinDisk)
			if kind.name == "tx" {
				s, err := q.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
					return tx.Put("rec/"+s.Formatted, []byte("x"))
				})
				assert.ErrorIs(t, err, errPinDisk)
				assert.Equal(t, uint64(11), s.N)
			}

			// Many callers combined into batches: each gets its own number
			// and the error.
			start, _ := q.Peek(ctx)
			var mu sync.Mutex
			var got []uint64
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					n, err := q.Next(ctx)
					assert.ErrorIs(t, err, errPinDisk)
					mu.Lock()
					got = append(got, n-start)
					mu.Unlock()
				})
			}
			wg.Wait()
			requireExactly(t, got, 64)
		})
	}
}

// A store that rolls the counter back but keeps a claim record above it: the
// claim is a rollback, not an answer (a later Next would hand its number
// out again).
func TestClaimRecordAboveCounterIsRollback(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(newMem())
	sealer := newSealer()
	t.Cleanup(func() { _ = adv.Store().Close() })
	svc := sequence.NewService(adv.Store(), sealer, "v/", sequence.Config{})
	q := mustSequence(t, svc, "inv")
	for range 2 {
		_, err := q.Next(ctx)
		require.NoError(t, err)
	}
	keys, err := adv.Keys(ctx, "v/_sequences/inv")
	require.NoError(t, err)
	require.Equal(t, []string{"v/_sequences/inv"}, keys)
	old, err := adv.Raw().Get(ctx, "v/_sequences/inv")
	require.NoError(t, err)

	id := sequence.NewRequestID()
	n, err := q.Claim(ctx, id)
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
	require.NoError(t, adv.Set(ctx, "v/_sequences/inv", old.Value)) // counter back to 2, claim record kept

	// A new Service: nothing cached, as on another device or after a restart.
	q = mustSequence(t, sequence.NewService(adv.Store(), sealer, "v/", sequence.Config{}), "inv")
	n, err = q.Claim(ctx, id)
	assert.ErrorIs(t, err, sequence.ErrRollback)
	assert.Zero(t, n)
}

// Voided after Close fails like every other call.
func TestVoidedAfterClose(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, newMem(), sequence.Config{})
	q := mustSequence(t, svc, "inv")
	_, err := q.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Void(ctx, 1, "cancelled"))
	require.NoError(t, svc.Close())
	reason, voided, err := q.Voided(ctx, 1)
	assert.ErrorIs(t, err, stores.ErrClosed)
	assert.False(t, voided)
	assert.Empty(t, reason)
}

// unpinnedStore commits every transaction and then, once told to, reports
// it as committed with a pin not saved (as the vault's ledger batch does).
type unpinnedStore struct {
	stores.Store
	tr   stores.Transactor
	fail atomic.Bool
}

func (s *unpinnedStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	if err := s.tr.Update(ctx, fn); err != nil {
		return err
	}
	if s.fail.Load() {
		return fmt.Errorf("ledger head: %w: %w", pins.ErrUnpinned, errPinDisk)
	}
	return nil
}

// A transaction reported committed with its pin not saved: its numbers come
// with the error, and a void says it was made.
func TestUnpinnedCommitKeepsTheNumbers(t *testing.T) {
	ctx := context.Background()
	inner := newMem()
	st := &unpinnedStore{Store: inner, tr: inner}
	svc := newService(t, st, sequence.Config{Journal: &journal{}})
	q := mustSequence(t, svc, "inv")
	_, err := q.Next(ctx)
	require.NoError(t, err)
	st.fail.Store(true)
	n, err := q.Next(ctx)
	assert.ErrorIs(t, err, errPinDisk)
	assert.Equal(t, uint64(2), n)
	err = q.Void(ctx, 1, "cancelled")
	assert.ErrorIs(t, err, errPinDisk)
	st.fail.Store(false)
	_, voided, err := q.Voided(ctx, 1)
	require.NoError(t, err)
	assert.True(t, voided)
	n, err = q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), n, "the number returned with the error stays taken")
}
