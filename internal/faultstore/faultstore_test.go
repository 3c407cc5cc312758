package faultstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

func keys(t testing.TB, s stores.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for it, err := range s.List(context.Background(), "") {
		require.NoError(t, err)
		out[it.Key] = string(it.Value)
	}
	return out
}

func TestZeroOptionsPassThrough(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	s := faultstore.New(inner, faultstore.Options{})
	assert.Equal(t, inner.Capabilities(), s.Capabilities())

	v1, err := s.Put(ctx, "a", []byte("1"))
	require.NoError(t, err)
	v2, err := s.CompareAndSwap(ctx, "a", v1, []byte("2"))
	require.NoError(t, err)
	_, err = s.CompareAndSwap(ctx, "a", v1, []byte("3"))
	assert.ErrorIs(t, err, stores.ErrConflict)
	it, err := s.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, v2, it.Version)
	assert.Equal(t, "2", string(it.Value))

	tx, ok := s.(stores.Transactor)
	require.True(t, ok, "memstore's Transactor shows through")
	require.NoError(t, tx.Update(ctx, func(tx stores.Tx) error { return tx.Put("b", []byte("x")) }))
	require.NoError(t, s.Delete(ctx, "a"))
	assert.Equal(t, map[string]string{"b": "x"}, keys(t, inner))
	require.NoError(t, s.Close())
	_, err = inner.Get(ctx, "b")
	assert.ErrorIs(t, err, stores.ErrClosed)
}

func TestHideTransactorAndCapabilities(t *testing.T) {
	s := faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true, NotCASAtomic: true})
	_, ok := s.(stores.Transactor)
	assert.False(t, ok)
	c := s.Capabilities()
	assert.False(t, c.Transactions)
	assert.False(t, c.CASAtomic)
}

func TestFailBeforeWritesNothing(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	s := faultstore.New(inner, faultstore.Options{FailBefore: 1})
	_, err := s.Put(ctx, "a", []byte("1"))
	assert.ErrorIs(t, err, faultstore.ErrInjected)
	_, err = s.CompareAndSwap(ctx, "a", 0, []byte("1"))
	assert.ErrorIs(t, err, faultstore.ErrInjected)
	err = s.(stores.Transactor).Update(ctx, func(tx stores.Tx) error {
		t.Error("fn must not run")
		return nil
	})
	assert.ErrorIs(t, err, faultstore.ErrInjected)
	assert.Empty(t, keys(t, inner))

	// Reads are untouched unless asked for.
	_, err = s.Get(ctx, "a")
	assert.ErrorIs(t, err, stores.ErrNotFound)
	reads := faultstore.New(inner, faultstore.Options{FailBefore: 1, Reads: true})
	_, err = reads.Get(ctx, "a")
	assert.ErrorIs(t, err, faultstore.ErrInjected)
	for _, err := range reads.List(ctx, "") {
		assert.ErrorIs(t, err, faultstore.ErrInjected)
	}
	assert.Equal(t, faultstore.Stats{Before: 3}, s.(*faultstore.TxStore).Stats())
}

func TestFailAfterAppliesTheWrite(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	s := faultstore.New(inner, faultstore.Options{FailAfter: 1})
	_, err := s.Put(ctx, "a", []byte("1"))
	assert.ErrorIs(t, err, faultstore.ErrInjectedAfter)
	_, err = s.CompareAndSwap(ctx, "b", 0, []byte("2"))
	assert.ErrorIs(t, err, faultstore.ErrInjectedAfter)
	err = s.(stores.Transactor).Update(ctx, func(tx stores.Tx) error { return tx.Put("c", []byte("3")) })
	assert.ErrorIs(t, err, faultstore.ErrInjectedAfter)
	assert.Equal(t, map[string]string{"a": "1", "b": "2", "c": "3"}, keys(t, inner))

	// A write the inner store refused is reported as it is, not as ambiguous.
	_, err = s.CompareAndSwap(ctx, "b", 0, []byte("x"))
	assert.ErrorIs(t, err, stores.ErrConflict)
	boom := errors.New("boom")
	err = s.(stores.Transactor).Update(ctx, func(stores.Tx) error { return boom })
	assert.Same(t, boom, err)
	assert.Equal(t, faultstore.Stats{After: 3}, s.(*faultstore.TxStore).Stats())
}

func TestConflictOnlyStrikesConditionalWrites(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	s := faultstore.New(inner, faultstore.Options{Conflict: 1})
	_, err := s.Put(ctx, "a", []byte("1"))
	require.NoError(t, err, "an unconditional Put cannot conflict")
	_, err = s.CompareAndSwap(ctx, "b", 0, []byte("2"))
	assert.ErrorIs(t, err, stores.ErrConflict)
	err = s.(stores.Transactor).Update(ctx, func(tx stores.Tx) error { return tx.Put("c", []byte("3")) })
	assert.ErrorIs(t, err, stores.ErrConflict)
	assert.Equal(t, map[string]string{"a": "1"}, keys(t, inner))
}

func TestSameSeedSameFaults(t *testing.T) {
	run := func(seed uint64) []string {
		inner := memstore.New()
		s := faultstore.New(inner, faultstore.Options{Seed: seed, FailBefore: 0.2, FailAfter: 0.2, Conflict: 0.2})
		var out []string
		for i := range 200 {
			_, err := s.CompareAndSwap(context.Background(), "k", 0, []byte{byte(i)})
			if err != nil {
				out = append(out, err.Error())
			} else {
				out = append(out, "ok")
			}
			require.NoError(t, inner.Delete(context.Background(), "k"))
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, c)
	assert.Contains(t, a, "ok")
	assert.Contains(t, a, faultstore.ErrInjected.Error())
	assert.Contains(t, a, faultstore.ErrInjectedAfter.Error())
	assert.Contains(t, a, stores.ErrConflict.Error())
}

func TestHooks(t *testing.T) {
	ctx := context.Background()
	inner := memstore.New()
	boom := errors.New("boom")
	var seen []string
	s := faultstore.New(inner, faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			seen = append(seen, "before "+op.String()+" "+key)
			if key == "deny" {
				return boom
			}
			return nil
		},
		After: func(op faultstore.Op, key string) error {
			seen = append(seen, "after "+op.String()+" "+key)
			if key == "lie" {
				return boom
			}
			return nil
		},
	})
	_, err := s.Put(ctx, "deny", nil)
	assert.Same(t, boom, err)
	_, err = s.Put(ctx, "lie", []byte("v"))
	assert.Same(t, boom, err)
	_, err = s.Get(ctx, "lie")
	require.NoError(t, err)
	assert.Equal(t, []string{"before put deny", "before put lie", "after put lie", "before get lie"}, seen)
	assert.Equal(t, map[string]string{"lie": "v"}, keys(t, inner))
}

func TestLatencyHonoursContext(t *testing.T) {
	s := faultstore.New(memstore.New(), faultstore.Options{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Put(ctx, "a", nil)
	assert.ErrorIs(t, err, context.Canceled)

	quick := faultstore.New(memstore.New(), faultstore.Options{Latency: time.Microsecond})
	_, err = quick.Put(context.Background(), "a", nil)
	assert.NoError(t, err)
}

func TestOpString(t *testing.T) {
	assert.Equal(t, "compare-and-swap", faultstore.OpCompareAndSwap.String())
	assert.Equal(t, "unknown", faultstore.Op(99).String())
	assert.True(t, faultstore.OpUpdate.IsWrite())
	assert.False(t, faultstore.OpList.IsWrite())
}
