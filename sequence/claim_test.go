package sequence_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

func TestClaimAdoptsEarlierResult(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "r")
			a, b := sequence.NewRequestID(), sequence.NewRequestID()
			n, err := q.Claim(ctx, a)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
			n, err = q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n)
			n, err = q.Claim(ctx, b)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), n)
			n, err = q.Claim(ctx, a)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n, "a retry gets the first result")

			// Ids are per counter: the same id on another partition is another request.
			other := mustSequence(t, svc, "r", sequence.Options{Partition: []any{"x"}})
			n, err = other.Claim(ctx, a)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
			n, err = other.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n)
		})
	}
}

func TestClaimRequestIDs(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "r")
			for _, id := range []string{"", "a\x00b", strings.Repeat("x", sequence.MaxRequestIDLen+1)} {
				_, err := q.Claim(ctx, id)
				var ve *sequence.ValidationError
				require.ErrorAs(t, err, &ve, "%q", id)
				assert.Equal(t, "request id", ve.Field)
			}
			v4 := uuid.NewString()
			_, err := q.Claim(ctx, v4)
			if kind.name == "tx" {
				assert.NoError(t, err, "any id on a transactional store")
				_, err = q.Claim(ctx, "order-17/attempt")
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, sequence.ErrInvalid, "UUIDv7 only without transactions")
			}
		})
	}
}

// Same ids inside one combined batch get one number.
func TestClaimConcurrentSameID(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			svc := newService(t, kind.new(newMem(), faultstore.Options{}), sequence.Config{})
			q := mustSequence(t, svc, "r")
			ids := make([]string, 8)
			for i := range ids {
				ids[i] = sequence.NewRequestID()
			}
			got := make([][]uint64, len(ids))
			var mu sync.Mutex
			var wg sync.WaitGroup
			for range 16 {
				for i, id := range ids {
					wg.Go(func() {
						n, err := q.Claim(context.Background(), id)
						assert.NoError(t, err)
						mu.Lock()
						got[i] = append(got[i], n)
						mu.Unlock()
					})
				}
			}
			wg.Wait()
			var firsts []uint64
			for i := range ids {
				for _, n := range got[i] {
					assert.Equal(t, got[i][0], n, "id %d got two numbers", i)
				}
				firsts = append(firsts, got[i][0])
			}
			requireExactly(t, firsts, len(ids))
		})
	}
}

func TestClaimWindowExpires(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, faultstore.New(newMem(), faultstore.Options{HideTransactor: true}), sequence.Config{ClaimWindow: 4})
	q := mustSequence(t, svc, "r")
	unused := sequence.NewRequestID() // made early, never claimed
	ids := make([]string, 6)
	for i := range ids {
		ids[i] = sequence.NewRequestID()
		n, err := q.Claim(ctx, ids[i])
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), n)
	}
	// The window holds the last 4 ids: 3..6.
	for i := 2; i < 6; i++ {
		n, err := q.Claim(ctx, ids[i])
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), n)
	}
	for _, id := range []string{ids[0], ids[1], unused} {
		_, err := q.Claim(ctx, id)
		assert.ErrorIs(t, err, sequence.ErrRequestExpired, "fail closed")
	}
	n, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), n, "expired claims took nothing")
	n, err = q.Claim(ctx, sequence.NewRequestID())
	require.NoError(t, err)
	assert.Equal(t, uint64(7), n)
}

func TestClaimWindowSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	inner := newMem()
	sealer := newSealer()
	open := func() *sequence.Sequence {
		s := faultstore.New(inner, faultstore.Options{HideTransactor: true})
		return mustSequence(t, sequence.NewService(s, sealer, "", sequence.Config{ClaimWindow: 2}), "r")
	}
	ids := []string{sequence.NewRequestID(), sequence.NewRequestID(), sequence.NewRequestID()}
	q := open()
	for _, id := range ids {
		_, err := q.Claim(ctx, id)
		require.NoError(t, err)
	}
	q = open()
	_, err := q.Claim(ctx, ids[0])
	assert.ErrorIs(t, err, sequence.ErrRequestExpired)
	n, err := q.Claim(ctx, ids[2])
	require.NoError(t, err)
	assert.Equal(t, uint64(3), n)
	n, err = q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), n)
}

// Claims retried with the same id through ambiguous and failed writes end up
// with exactly one number each, no gap.
func TestClaimUnderFaults(t *testing.T) {
	workers, calls := 32, 1000
	if testing.Short() {
		calls = 100
	}
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			s := kind.new(newMem(), faultstore.Options{Seed: 42, FailBefore: 0.05, FailAfter: 0.05, Conflict: 0.02})
			svc := newService(t, s, sequence.Config{})
			q := mustSequence(t, svc, "claims")
			var retries sync.Map
			got := hammer(t, workers, calls, func(ctx context.Context) (uint64, error) {
				id := sequence.NewRequestID()
				for attempt := 0; ; attempt++ {
					n, err := q.Claim(ctx, id)
					if err == nil {
						if attempt > 0 {
							retries.Store(id, attempt)
						}
						return n, nil
					}
					if attempt >= 100 {
						return 0, fmt.Errorf("claim keeps failing: %w", err)
					}
				}
			})
			requireExactly(t, got, workers*calls)
			n, err := q.Peek(context.Background())
			require.NoError(t, err)
			assert.Equal(t, uint64(workers*calls), n, "no number taken beyond the ones returned")
			var r int
			retries.Range(func(any, any) bool { r++; return true })
			st := faultstore.Stats{}
			switch fs := s.(type) {
			case *faultstore.TxStore:
				st = fs.Stats()
			case *faultstore.Store:
				st = fs.Stats()
			}
			assert.Positive(t, st.After, "ambiguous writes happened")
			t.Logf("%s: %d claims retried; faults %+v", kind.name, r, st)
		})
	}
}

// A Claim that reaches its claim key after the vault's Close wiped the
// claim MAC key fails with ErrClosed: a wiped MAC is no MAC, not a key
// shorter than a claim's (which panicked), nor one every id shares.
func TestClaimWithWipedClaimKeyIsClosed(t *testing.T) {
	ctx := context.Background()
	st := newMem()
	t.Cleanup(func() { _ = st.Close() })
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	mac := crypto.NewMACer(key)
	l := &ledgerStub{st: st, sealer: newSealer()}
	svc := sequence.NewService(st, l.sealer, "v/", sequence.Config{Journal: l, History: l, ClaimMAC: mac})
	q := mustSequence(t, svc, "orders")
	n, err := q.Claim(ctx, "order-1")
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)

	mac.Wipe() // what Close does to the vault's claim key
	assert.NotPanics(t, func() {
		n, err = q.Claim(ctx, "order-2")
	})
	assert.ErrorIs(t, err, stores.ErrClosed)
	assert.Zero(t, n)
	head, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head, "the refused claim took nothing")
}
