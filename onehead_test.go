package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// oneSeriesStores are the stores where Numbered.Put numbers at write time,
// through the counter of the series' name, while passes of the same name
// number from their own head. PostgreSQL needs scripts/with-postgres.
func oneSeriesStores() map[string]func(testing.TB) stores.Store {
	m := memAndBadger()
	m["pgstore"] = func(t testing.TB) stores.Store { return pgtest.Open(t, nil) }
	return m
}

// numbersOf returns the number each record of c carries, read through the
// handle h (either path's number), and checks that no number is given
// twice and that the numbers are exactly 1..len.
func numbersOf(t testing.TB, c *vault.Collection[Stub], h *vault.Numbered[Stub]) map[string]uint64 {
	t.Helper()
	ctx := context.Background()
	byID := map[string]uint64{}
	var numbers []uint64
	for r, err := range c.List(ctx) {
		require.NoError(t, err)
		got, err := h.Get(ctx, r.ID)
		require.NoError(t, err)
		if got.Serial.N == 0 {
			continue
		}
		byID[r.ID] = got.Serial.N
		numbers = append(numbers, got.Serial.N)
	}
	slices.Sort(numbers)
	for i, n := range numbers {
		require.Equal(t, uint64(i+1), n, "numbers are exactly 1..%d, none twice: %v", len(numbers), byID)
	}
	return byID
}

// A series numbered at write time (Numbered.Put's counter) gets no number
// from a pass of the same name: Enqueue is refused with
// numbering.ErrNumberedAtWriteTime, writing nothing, and so is a pass over
// an entry enqueued before the counter took its first number. The online
// numbers go on 1, 2. (Before the fix the pass gave b number 1 again.)
func TestOneSeriesOnlineThenPass(t *testing.T) {
	for name, open := range oneSeriesStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := openVault(t, openDB(t, open(t), "alice", "s3cret"), "books")
			c, h := stubsOf(t, v)
			require.True(t, h.Online())

			// b is put in line while the counter has no head yet.
			require.NoError(t, c.Put(ctx, "b", Stub{Total: 2}))
			_, err := h.Series().Enqueue(ctx, "b")
			require.NoError(t, err)
			r, err := h.Put(ctx, "a", Stub{Total: 1})
			require.NoError(t, err)
			require.Equal(t, uint64(1), r.Serial.N)

			// The pass refuses b's entry, writing nothing.
			_, err = h.Settle(ctx)
			require.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime)
			pending, err := h.Series().Pending(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, pending, "b's entry waits")
			last, err := h.Series().Last(ctx)
			require.NoError(t, err)
			assert.Zero(t, last, "the pass committed no batch")

			// A new entry is refused, writing none.
			require.NoError(t, c.Put(ctx, "d", Stub{Total: 4}))
			_, err = h.Series().Enqueue(ctx, "d")
			require.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime)
			pending, err = h.Series().Pending(ctx)
			require.NoError(t, err)
			assert.Equal(t, 1, pending, "no entry for d")

			r, err = h.Put(ctx, "c", Stub{Total: 3})
			require.NoError(t, err)
			assert.Equal(t, uint64(2), r.Serial.N)
			assert.Equal(t, map[string]uint64{"a": 1, "c": 2}, numbersOf(t, c, h))
			a, err := h.Audit(ctx)
			require.NoError(t, err)
			assert.True(t, a.Clean(), "audit clean: %+v", a)
		})
	}
}

// A series numbered by a pass takes no number at write time: Numbered.Put,
// a plain Sequence.Next and Collection.PutNumbered of the same name are
// refused with numbering.ErrNumberedAtWriteTime, writing nothing (no
// record, the counter untouched). (Before the fix they took number 1 again.)
func TestOneSeriesPassThenOnline(t *testing.T) {
	for name, open := range oneSeriesStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := openVault(t, openDB(t, open(t), "alice", "s3cret"), "books")
			c, h := stubsOf(t, v)
			require.True(t, h.Online())

			require.NoError(t, c.Put(ctx, "b", Stub{Total: 2}))
			_, err := h.Series().Enqueue(ctx, "b")
			require.NoError(t, err)
			rep, err := h.Settle(ctx)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Assigned)

			_, err = h.Put(ctx, "a", Stub{Total: 1})
			require.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime)
			_, err = c.Get(ctx, "a")
			require.ErrorIs(t, err, vault.ErrNotFound, "a was not written")

			q, err := v.Sequence("ticket", sequence.Options{})
			require.NoError(t, err)
			_, err = q.Next(ctx)
			require.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime)
			_, err = c.PutNumbered(ctx, "e", q, func(s sequence.Serial) (Stub, error) {
				return Stub{No: s.Formatted}, nil
			})
			require.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime)
			_, err = c.Get(ctx, "e")
			require.ErrorIs(t, err, vault.ErrNotFound, "e was not written")
			head, err := q.Peek(ctx)
			require.NoError(t, err)
			assert.Zero(t, head, "the counter took no number")

			// The passes go on: 2 is the next number.
			require.NoError(t, c.Put(ctx, "c", Stub{Total: 3}))
			_, err = h.Series().Enqueue(ctx, "c")
			require.NoError(t, err)
			_, err = h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, map[string]uint64{"b": 1, "c": 2}, numbersOf(t, c, h))
			a, err := h.Audit(ctx)
			require.NoError(t, err)
			assert.True(t, a.Clean(), "audit clean: %+v", a)
		})
	}
}

// Online Puts and passes of one series at once: whichever path
// numbers first, the other is refused (numbering.ErrNumberedAtWriteTime),
// and the records carry exactly 1..N, none twice. (Before the fix both paths
// counted from 1.)
func TestOneSeriesConcurrentPaths(t *testing.T) {
	for name, open := range oneSeriesStores() {
		t.Run(name, func(t *testing.T) { oneSeriesConcurrent(t, open) })
	}
}

func oneSeriesConcurrent(t *testing.T, open func(testing.TB) stores.Store) {
	const rounds, writers = 10, 4
	for round := range rounds {
		ctx := context.Background()
		v := openVault(t, openDB(t, open(t), "alice", "s3cret"), "books")
		c, h := stubsOf(t, v)
		require.True(t, h.Online())
		var wg sync.WaitGroup
		errs := make(chan error, 4*writers*8)
		for w := range writers {
			wg.Go(func() { // online
				for i := range 8 {
					_, err := h.Put(ctx, fmt.Sprintf("on-%d-%d", w, i), Stub{Total: i})
					if err != nil && !assert.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime) {
						errs <- err
					}
				}
			})
			wg.Go(func() { // by passes
				for i := range 8 {
					id := fmt.Sprintf("by-%d-%d", w, i)
					if err := c.Put(ctx, id, Stub{Total: i}); err != nil {
						errs <- err
						return
					}
					if _, err := h.Series().Enqueue(ctx, id); err != nil && !assert.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime) {
						errs <- err
					}
					_, err := h.Settle(ctx)
					if err != nil && !assert.True(t, errorsIsAny(err, numbering.ErrNumberedAtWriteTime, numbering.ErrPassRunning), "%v", err) {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		byID := numbersOf(t, c, h)
		var online, passes int
		for id := range byID {
			if id[:2] == "on" {
				online++
			} else {
				passes++
			}
		}
		require.NotZero(t, len(byID), "some records got numbers")
		assert.True(t, online == 0 || passes == 0, "one path numbered the series: %d online, %d by passes", online, passes)
		a, err := h.Audit(ctx)
		require.NoError(t, err)
		assert.True(t, a.Clean(), "audit clean: %+v", a)
		t.Logf("round %d: %d numbered online, %d by passes", round, online, passes)
	}
}

// errorsIsAny reports whether err matches one of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// A vault numbered at write time on its own device (a NumberingOf handle
// there is online), then joined to a hub, keeps its counter on the hub (the
// join seeds it). Its devices hand records off to passes, which the hub
// refuses with numbering.ErrNumberedAtWriteTime, numbering nothing: the
// series stays on its counter, which goes on at 2. (Before the fix the
// hub's pass gave the handed-off record number 1 again.)
func TestOneSeriesAfterHubJoin(t *testing.T) {
	ctx := context.Background()
	hub, dev := memstore.New(), memstore.New()
	solo := openStandalone(t, dev)
	_, h := stubsOf(t, solo)
	require.True(t, h.Online())
	r, err := h.Put(ctx, "a", Stub{Total: 1})
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Serial.N)
	require.NoError(t, solo.Close())

	d := openOnHub(t, dev, hub, deviceOpts{})
	_, dh := stubsOf(t, d)
	require.False(t, dh.Online())
	r, err = dh.Put(ctx, "b", Stub{Total: 2})
	require.NoError(t, err)
	require.True(t, r.Pending)
	copyRecords(t, dev, hub, "tickets", false)
	_, err = dh.Settle(ctx)
	require.ErrorIs(t, err, numbering.ErrNumberedAtWriteTime)

	direct := openHubDirect(t, hub)
	hc, hh := stubsOf(t, direct)
	got, err := hh.Get(ctx, "b")
	require.NoError(t, err)
	assert.Zero(t, got.Serial.N, "b got no number on the hub")
	last, err := hh.Series().Last(ctx)
	require.NoError(t, err)
	assert.Zero(t, last, "the hub's passes gave nothing")

	// The counter goes on after the device's head.
	r, err = hh.Put(ctx, "c", Stub{Total: 3})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), r.Serial.N)
	assert.Equal(t, map[string]uint64{"a": 1, "c": 2}, numbersOf(t, hc, hh), "a was copied to the hub with b")
}
