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

// A series numbered at write time (Numbered.Put's counter) and then by a
// pass: the pass numbers after the counter, and the counter goes on after
// the pass. An entry put in line before the first write-time number gets
// its number after it too. The records carry exactly 1..N and the audit
// of the series (one report for both paths) is clean. (Before one head,
// the pass was refused with numbering.ErrNumberedAtWriteTime, the records
// waiting for ever.)
func TestOneHeadOnlineThenPass(t *testing.T) {
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

			require.NoError(t, c.Put(ctx, "d", Stub{Total: 4}))
			_, err = h.Series().Enqueue(ctx, "d")
			require.NoError(t, err)
			rep, err := h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, rep.Assigned)
			assert.Equal(t, uint64(2), rep.First, "the pass numbers after the counter")

			r, err = h.Put(ctx, "c", Stub{Total: 3})
			require.NoError(t, err)
			assert.Equal(t, uint64(4), r.Serial.N, "the counter goes on after the pass")
			assert.Equal(t, map[string]uint64{"a": 1, "b": 2, "d": 3, "c": 4}, numbersOf(t, c, h))
			a, err := h.Audit(ctx)
			require.NoError(t, err)
			assert.True(t, a.Clean(), "audit clean: %+v", a)
			assert.Equal(t, 4, a.Numbered())
			assert.Equal(t, uint64(4), a.Online.Head)
		})
	}
}

// A series numbered by a pass, then at write time: Numbered.Put, a plain
// Sequence.Next and Collection.PutNumbered of the same name take the
// numbers after the pass's, and the next pass numbers after them. (Before
// one head they were refused with numbering.ErrNumberedAtWriteTime.)
func TestOneHeadPassThenOnline(t *testing.T) {
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

			r, err := h.Put(ctx, "a", Stub{Total: 1})
			require.NoError(t, err)
			assert.Equal(t, uint64(2), r.Serial.N)
			q, err := v.Sequence("ticket", sequence.Options{})
			require.NoError(t, err)
			e, err := c.PutNumbered(ctx, "e", q, func(s sequence.Serial) (Stub, error) {
				return Stub{No: s.Formatted}, nil
			})
			require.NoError(t, err)
			assert.Equal(t, "T-00003", e.No)
			n, err := q.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(4), n)
			require.NoError(t, q.Void(ctx, 4, "spoiled"))

			require.NoError(t, c.Put(ctx, "c", Stub{Total: 3}))
			_, err = h.Series().Enqueue(ctx, "c")
			require.NoError(t, err)
			rep, err = h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(5), rep.First)
			assert.Equal(t, map[string]uint64{"b": 1, "a": 2, "e": 3, "c": 5}, numbersCarried(t, c, h))
			a, err := h.Audit(ctx)
			require.NoError(t, err)
			assert.True(t, a.Clean(), "audit clean: %+v", a)
			assert.Equal(t, 1, a.Online.Voided)
		})
	}
}

// numbersCarried returns the number each record of c carries, read
// through h, without requiring them to be 1..N (a number may be voided).
func numbersCarried(t testing.TB, c *vault.Collection[Stub], h *vault.Numbered[Stub]) map[string]uint64 {
	t.Helper()
	ctx := context.Background()
	byID := map[string]uint64{}
	for r, err := range c.List(ctx) {
		require.NoError(t, err)
		got, err := h.Get(ctx, r.ID)
		require.NoError(t, err)
		if got.Serial.N != 0 {
			byID[r.ID] = got.Serial.N
		}
	}
	return byID
}

// Online Puts and passes of one series at once, from several goroutines:
// every record ends with a number, the numbers are exactly 1..N, none
// twice, and the audit of the series is clean. (Before one head, the
// second path was refused.)
func TestOneHeadConcurrentPaths(t *testing.T) {
	for name, open := range oneSeriesStores() {
		t.Run(name, func(t *testing.T) { oneHeadConcurrent(t, open) })
	}
}

func oneHeadConcurrent(t *testing.T, open func(testing.TB) stores.Store) {
	const rounds, writers, each = 4, 4, 8
	for round := range rounds {
		ctx := context.Background()
		v := openVault(t, openDB(t, open(t), "alice", "s3cret"), "books")
		c, h := stubsOf(t, v)
		require.True(t, h.Online())
		var wg sync.WaitGroup
		errs := make(chan error, 4*writers*each)
		for w := range writers {
			wg.Go(func() { // online
				for i := range each {
					if _, err := h.Put(ctx, fmt.Sprintf("on-%d-%d", w, i), Stub{Total: i}); err != nil {
						errs <- err
					}
				}
			})
			wg.Go(func() { // by passes
				for i := range each {
					id := fmt.Sprintf("by-%d-%d", w, i)
					if err := c.Put(ctx, id, Stub{Total: i}); err != nil {
						errs <- err
						return
					}
					if _, err := h.Series().Enqueue(ctx, id); err != nil {
						errs <- err
					}
					if _, err := h.Settle(ctx); err != nil && !errors.Is(err, numbering.ErrPassRunning) {
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
		_, err := h.Settle(ctx) // what the concurrent passes left in line
		require.NoError(t, err)
		byID := numbersOf(t, c, h)
		require.Len(t, byID, 2*writers*each, "every record has its number")
		a, err := h.Audit(ctx)
		require.NoError(t, err)
		assert.True(t, a.Clean(), "audit clean: %+v", a)
		assert.Equal(t, 2*writers*each, a.Numbered())
		t.Logf("round %d: %d numbers", round, len(byID))
	}
}

// A vault numbered at write time on its own device (a NumberingOf handle
// there is online), then joined to a hub, keeps its counter on the hub (the
// join seeds it). Its devices hand records off to passes on the hub, which
// number after the device's numbers, and the counter goes on after the
// passes. (Before one head the hub's pass refused them with
// numbering.ErrNumberedAtWriteTime, and before that gave number 1 again.)
func TestOneHeadAfterHubJoin(t *testing.T) {
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
	rep, err := dh.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Assigned)

	direct := openHubDirect(t, hub)
	hc, hh := stubsOf(t, direct)
	got, err := hh.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), got.Serial.N, "b is numbered after the device's a")

	// The counter goes on after the pass.
	r, err = hh.Put(ctx, "c", Stub{Total: 3})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), r.Serial.N)
	assert.Equal(t, map[string]uint64{"a": 1, "b": 2, "c": 3}, numbersOf(t, hc, hh), "a was copied to the hub with b")
	a, err := hh.Audit(ctx)
	require.NoError(t, err)
	assert.True(t, a.Clean(), "audit clean: %+v", a)
}

// A series numbered by passes that did not raise its counter (a vault of a
// version before one head per series: here its counter is deleted after
// the passes) takes its next write-time number after the passes' head, and
// raises no alarm: the ledger records the passes' numbers as theirs.
func TestOneHeadCounterBelowThePassesIsRaised(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			db, v := openSession(t, adv.Store(), "")
			c, h := stubsOf(t, v)
			handOff(t, c, h, "a", "b", "c")
			_, err := h.Settle(ctx)
			require.NoError(t, err)
			require.NoError(t, db.Close())
			require.NoError(t, adv.Drop(ctx, "v/books/_sequences/ticket"))

			_, v2 := openSession(t, adv.Store(), "")
			c2, h2 := stubsOf(t, v2)
			r, err := h2.Put(ctx, "d", Stub{Total: 4})
			require.NoError(t, err)
			assert.Equal(t, uint64(4), r.Serial.N)
			assert.Equal(t, map[string]uint64{"a": 1, "b": 2, "c": 3, "d": 4}, numbersOf(t, c2, h2))
			a, err := h2.Audit(ctx)
			require.NoError(t, err)
			assert.True(t, a.Clean(), "audit clean: %+v", a)
		})
	}
}
