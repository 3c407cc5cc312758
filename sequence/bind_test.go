package sequence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

func TestBindWritesRecordAndNumberTogether(t *testing.T) {
	ctx := context.Background()
	inner := newMem()
	svc := newService(t, inner, sequence.Config{})
	q := mustSequence(t, svc, "inv", sequence.Options{Format: "INV-{seq:03}"})
	s, err := q.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
		return tx.Put("records/"+s.Formatted, []byte(strconv.FormatUint(s.N, 10)))
	})
	require.NoError(t, err)
	assert.Equal(t, sequence.Serial{N: 1, Formatted: "INV-001"}, s)
	item, err := inner.Get(ctx, "records/INV-001")
	require.NoError(t, err)
	assert.Equal(t, "1", string(item.Value))
	n, err := q.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n)
}

func TestBindFailureTakesNothing(t *testing.T) {
	ctx := context.Background()
	inner := newMem()
	svc := newService(t, inner, sequence.Config{})
	q := mustSequence(t, svc, "inv")
	_, err := q.Next(ctx)
	require.NoError(t, err)

	boom := errors.New("record rejected")
	var offered uint64
	_, err = q.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
		offered = s.N
		require.NoError(t, tx.Put("records/x", []byte("partial")))
		return boom
	})
	assert.ErrorIs(t, err, boom)
	assert.Equal(t, uint64(2), offered)
	_, err = inner.Get(ctx, "records/x")
	assert.ErrorIs(t, err, stores.ErrNotFound, "the failed fn's writes are dropped")

	n, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n, "the number fn was offered is still the next one")
}

func TestBindPanicIsReraised(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, newMem(), sequence.Config{})
	q := mustSequence(t, svc, "inv")
	assert.PanicsWithValue(t, "kaboom", func() {
		_, _ = q.Bind(ctx, func(stores.Tx, sequence.Serial) error { panic("kaboom") })
	})
	n, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n, "the combiner survives and nothing was taken")
}

func TestBindGuards(t *testing.T) {
	ctx := context.Background()
	svc := newService(t, newMem(), sequence.Config{})
	q := mustSequence(t, svc, "inv")
	for _, key := range []string{q.Key(), q.Key() + "\x01c\x00forged", q.Key() + "\x01v\x001"} {
		_, err := q.Bind(ctx, func(tx stores.Tx, _ sequence.Serial) error { return tx.Put(key, []byte("x")) })
		assert.ErrorIs(t, err, stores.ErrInvalidKey, "%q", key)
	}
	_, err := q.Bind(ctx, nil)
	assert.ErrorIs(t, err, sequence.ErrInvalid)

	var kept stores.Tx
	_, err = q.Bind(ctx, func(tx stores.Tx, _ sequence.Serial) error {
		kept = tx
		_, err := tx.Get("missing")
		assert.ErrorIs(t, err, stores.ErrNotFound)
		require.NoError(t, tx.Put("a", []byte("1")))
		item, err := tx.Get("a")
		require.NoError(t, err)
		assert.Equal(t, "1", string(item.Value), "reads see the fn's own writes")
		require.NoError(t, tx.Delete("a"))
		_, err = tx.Get("a")
		assert.ErrorIs(t, err, stores.ErrNotFound)
		return nil
	})
	require.NoError(t, err)
	assert.Error(t, kept.Put("late", nil), "tx is dead after fn returns")

	cas := newService(t, faultstore.New(newMem(), faultstore.Options{HideTransactor: true}), sequence.Config{})
	_, err = mustSequence(t, cas, "inv").Bind(ctx, func(stores.Tx, sequence.Serial) error { return nil })
	assert.ErrorIs(t, err, stores.ErrNotSupported)
}

// Concurrent Binds share transactions; failing ones take no number, and every
// successful one wrote exactly its record.
func TestBindConcurrent(t *testing.T) {
	const workers, calls = 32, 100
	ctx := context.Background()
	inner := newMem()
	j := &journal{}
	svc := newService(t, faultstore.New(inner, faultstore.Options{Seed: 3, Conflict: 0.05}), sequence.Config{Journal: j})
	q := mustSequence(t, svc, "inv")
	var mu sync.Mutex
	var got []uint64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range calls {
				fail := (w+i)%5 == 0
				s, err := q.Bind(ctx, func(tx stores.Tx, s sequence.Serial) error {
					if err := tx.Put(fmt.Sprintf("records/%d/%d", w, i), []byte(s.Formatted)); err != nil {
						return err
					}
					if fail {
						return errors.New("rejected")
					}
					return nil
				})
				if fail {
					assert.Error(t, err)
					continue
				}
				if assert.NoError(t, err) {
					mu.Lock()
					got = append(got, s.N)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	requireExactly(t, got, len(got))
	assert.Equal(t, workers*calls*4/5, len(got))

	// Each record holds the number its Bind returned; failed ones left nothing.
	numbers := map[string]bool{}
	for it, err := range inner.List(ctx, "records/") {
		require.NoError(t, err)
		numbers[string(it.Value)] = true
	}
	assert.Len(t, numbers, len(got))
	for _, n := range got {
		assert.True(t, numbers[strconv.FormatUint(n, 10)], "record for %d", n)
	}
	assert.Len(t, journalKeys(t, inner), len(got))
}
