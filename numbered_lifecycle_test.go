package noydb_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"context"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A record a pass numbered, deleted through the handle and written again
// under the same id, is a new record: the next pass numbers it (it is not
// left pending forever behind the old record's index entry), and Get, Lookup
// and the audit agree: the deleted record's number is orphaned, as a number
// taken at write time is when its record is deleted.
func TestNumberedDeleteThenPutAgainIsNumbered(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, openFileStore(t, t.TempDir()), "alice", "s3cret"), "books")
	c, h := stubsOf(t, v)
	require.False(t, h.Online())

	first, err := h.Put(ctx, "a", Stub{Total: 1})
	require.NoError(t, err)
	_, err = h.Put(ctx, "b", Stub{Total: 2})
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	require.NoError(t, err)
	g, err := h.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, uint64(1), g.Serial.N)

	require.NoError(t, h.Delete(ctx, "a"))
	r, err := h.Put(ctx, "a", Stub{Total: 3})
	require.NoError(t, err)
	require.True(t, r.Pending)
	_, ok, err := h.Series().Lookup(ctx, "a")
	require.NoError(t, err)
	assert.False(t, ok, "the new record a has no number yet")

	rep, err := h.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Assigned)
	g, err = h.Get(ctx, "a")
	require.NoError(t, err)
	assert.False(t, g.Pending, "numbered by the pass")
	assert.Equal(t, uint64(3), g.Serial.N)
	assert.Equal(t, "T-00003", g.Value.No)
	a, ok, err := h.Lookup(ctx, r.Provisional)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(3), a.Number)
	a, ok, err = h.Series().Lookup(ctx, "a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(3), a.Number)
	_, ok, err = h.Lookup(ctx, first.Provisional)
	require.NoError(t, err)
	assert.False(t, ok, "the first record's provisional id does not lead to its successor's number")
	pending, err := h.Series().Pending(ctx)
	require.NoError(t, err)
	assert.Zero(t, pending)
	au, err := h.Audit(ctx)
	require.NoError(t, err)
	assert.False(t, au.Clean(), "%+v", au)
	assert.Equal(t, 1, au.Online.Orphaned, "number 1's record was deleted")
	assert.Equal(t, []sequence.Run{
		{From: 1, To: 1, State: sequence.StateBound, Collection: "tickets", ID: "a", Orphaned: true},
		{From: 2, To: 2, State: sequence.StateBound, Collection: "tickets", ID: "b"},
		{From: 3, To: 3, State: sequence.StateBound, Collection: "tickets", ID: "a"},
	}, au.Online.Runs)
	assert.Equal(t, 3, au.Deferred.Assigned)
	got, err := c.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, Stub{No: "T-00003", Total: 3}, got)
}

// A pass that runs between the two writes of a Put that hands off again an
// id numbered and deleted before (its entry written, its record not yet)
// leaves the entry waiting, as for any id: the record that follows is
// numbered by the next pass, not left pending without an entry.
func TestNumberedPassBetweenHandoffWritesOfReusedID(t *testing.T) {
	ctx := context.Background()
	var (
		inPut atomic.Bool
		h     *vault.Numbered[Stub]
		rep   numbering.PassReport
		perr  error
	)
	st := faultstore.New(openFileStore(t, t.TempDir()), faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if op == faultstore.OpCompareAndSwap && strings.Contains(key, "/tickets/") && inPut.CompareAndSwap(true, false) {
				rep, perr = h.Settle(ctx)
			}
			return nil
		},
	})
	v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
	var c *vault.Collection[Stub]
	c, h = stubsOf(t, v)
	_, err := h.Put(ctx, "a", Stub{Total: 1})
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Delete(ctx, "a"))

	inPut.Store(true)
	r, err := h.Put(ctx, "a", Stub{Total: 2})
	require.NoError(t, err)
	require.NoError(t, perr)
	require.False(t, inPut.Load(), "the pass ran inside the Put")
	assert.Equal(t, numbering.PassReport{Waiting: 1}, rep, "the entry waits for its record")

	rep, err = h.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{Batch: 2, First: 2, Last: 2, Assigned: 1}, rep)
	g, err := h.Get(ctx, "a")
	require.NoError(t, err)
	assert.False(t, g.Pending)
	assert.Equal(t, "T-00002", g.Value.No)
	a, ok, err := h.Lookup(ctx, r.Provisional)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(2), a.Number)
	got, err := c.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "T-00002", got.No)
}

// Reading through the handle writes nothing: a Get on a series no Put or
// pass has used yet stores no config, so it cannot fix the series' format
// before its first writer chooses one.
func TestNumberedGetWritesNothing(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range map[string]func(testing.TB) stores.Store{
		"memstore":  func(testing.TB) stores.Store { return memstore.New() },
		"filestore": func(t testing.TB) stores.Store { return openFileStore(t, t.TempDir()) },
	} {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
			c := vault.CollectionOf[Stub](v, "tickets")
			require.NoError(t, c.Put(ctx, "plain", Stub{Total: 1}))
			reader, err := vault.NumberingOf(c, "ticket", sequence.Options{}, setStub)
			require.NoError(t, err)
			before := snapshot(t, st)
			g, err := reader.Get(ctx, "plain")
			require.NoError(t, err)
			assert.Equal(t, vault.NumberedRecord[Stub]{ID: "plain", Value: Stub{Total: 1}}, g)
			_, err = reader.Get(ctx, "missing")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			assert.Equal(t, before, snapshot(t, st), "nothing written")

			// The first writer still chooses the format.
			_, h := stubsOf(t, v)
			_, err = h.Put(ctx, "a", Stub{})
			require.NoError(t, err)
			_, err = h.Settle(ctx)
			require.NoError(t, err)
			g, err = reader.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, "T-00001", g.Value.No)
		})
	}
}

// A pass with nothing to do writes nothing, not even the series' config.
func TestNumberedIdlePassWritesNothing(t *testing.T) {
	ctx := context.Background()
	st := openFileStore(t, t.TempDir())
	v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
	c := vault.CollectionOf[Stub](v, "tickets")
	idle, err := vault.NumberingOf(c, "ticket", sequence.Options{}, setStub)
	require.NoError(t, err)
	before := snapshot(t, st)
	rep, err := idle.Settle(ctx)
	require.NoError(t, err)
	assert.Zero(t, rep)
	assert.Equal(t, before, snapshot(t, st), "nothing written")

	_, h := stubsOf(t, v)
	_, err = h.Put(ctx, "a", Stub{})
	require.NoError(t, err, "the first writer chooses the format")
	_, err = idle.Settle(ctx)
	require.NoError(t, err)
	g, err := h.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "T-00001", g.Value.No)
}

// A store that deletes a series' config cannot make a later pass number in
// another format: a handle without a format (as 'noydb number pass' opens
// it) would store plain decimal, and the pass refuses, since the numbers
// the series already gave were formatted otherwise. A handle with the
// series' format restores the config and numbers on.
func TestNumberedLostConfigIsNotReplaced(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(openFileStore(t, t.TempDir()))
	v := openVault(t, openDB(t, adv.Store(), "alice", "s3cret"), "books")
	c, h := stubsOf(t, v)
	_, err := h.Put(ctx, "a", Stub{})
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	require.NoError(t, err)

	keys, err := adv.Keys(ctx, "")
	require.NoError(t, err)
	dropped := 0
	for _, k := range keys {
		if strings.HasSuffix(k, "/_numbering/ticket/config") {
			require.NoError(t, adv.Drop(ctx, k))
			dropped++
		}
	}
	require.Equal(t, 1, dropped)

	// Another process: its handle has not read the config.
	v2 := openVault(t, openDB(t, adv.Store(), "alice", "s3cret"), "books")
	plain, err := vault.NumberingOf(vault.CollectionOf[Stub](v2, "tickets"), "ticket", sequence.Options{}, setStub)
	require.NoError(t, err)
	before := snapshot(t, adv.Raw())
	_, err = plain.Put(ctx, "b", Stub{})
	assert.ErrorIs(t, err, numbering.ErrMismatch)
	_, err = plain.Settle(ctx)
	assert.ErrorIs(t, err, numbering.ErrMismatch)
	assert.Equal(t, before, snapshot(t, adv.Raw()), "nothing written")

	v3 := openVault(t, openDB(t, adv.Store(), "alice", "s3cret"), "books")
	c3, h3 := stubsOf(t, v3)
	_, err = h3.Put(ctx, "b", Stub{})
	require.NoError(t, err)
	_, err = plain.Settle(ctx)
	require.NoError(t, err, "the config is back")
	checkStubs(t, v3, c3, h3, []string{"a", "b"})
	_ = c
}

// A store that serves a record as it was before its pass stamped it (a
// replayed revision, pending under the provisional id its number went to)
// cannot make the record lose its number silently: the handle's Get and Put
// fail with ErrRollback, since the series' index says that provisional id
// was numbered, and Put writes nothing.
func TestNumberedReplayedPendingRevisionIsRollback(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(openFileStore(t, t.TempDir()))
	v := openVault(t, openDB(t, adv.Store(), "alice", "s3cret"), "books")
	_, h := stubsOf(t, v)
	_, err := h.Put(ctx, "a", Stub{})
	require.NoError(t, err)
	unstamped, err := adv.Snapshot(ctx)
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	require.NoError(t, err)
	require.NoError(t, adv.Restore(ctx, unstamped, "v/books/tickets/"))

	_, err = h.Get(ctx, "a")
	assert.ErrorIs(t, err, vault.ErrRollback)
	before := snapshot(t, adv.Raw())
	_, err = h.Put(ctx, "a", Stub{Total: 5})
	assert.ErrorIs(t, err, vault.ErrRollback)
	assert.Equal(t, before, snapshot(t, adv.Raw()), "nothing written")
}

// A pass that stamps and indexes a pending record between the handle's
// read of the record and its read of the series' index is no rollback: the
// handle reads the record again, Get shows its number and Put keeps it.
func TestNumberedPassBetweenReadsIsNoRollback(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"get", "put"} {
		t.Run(op, func(t *testing.T) {
			var (
				armed atomic.Bool
				h     *vault.Numbered[Stub]
				perr  error
			)
			st := faultstore.New(openFileStore(t, t.TempDir()), faultstore.Options{
				Before: func(o faultstore.Op, key string) error {
					if o == faultstore.OpGet && strings.HasSuffix(key, "/assigned/a") && armed.CompareAndSwap(true, false) {
						_, perr = h.Settle(ctx)
					}
					return nil
				},
			})
			v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
			var c *vault.Collection[Stub]
			c, h = stubsOf(t, v)
			_, err := h.Put(ctx, "a", Stub{Total: 1})
			require.NoError(t, err)
			_, err = h.Put(ctx, "a", Stub{Total: 2}) // pending: the handle checks the index
			require.NoError(t, err)

			armed.Store(true)
			var r vault.NumberedRecord[Stub]
			if op == "get" {
				r, err = h.Get(ctx, "a")
			} else {
				r, err = h.Put(ctx, "a", Stub{Total: 3})
			}
			require.NoError(t, err)
			require.NoError(t, perr)
			require.False(t, armed.Load(), "the pass ran between the reads")
			assert.False(t, r.Pending)
			assert.Equal(t, "T-00001", r.Value.No)
			checkStubs(t, v, c, h, []string{"a"})
		})
	}
}

// Audit and Verify running next to writers and passes raise no false
// alarm (ErrRollback, ErrDuplicate, a ledger that does not verify), on a
// store numbered at write time and on one numbered by passes.
func TestNumberedAuditNextToWritersRaisesNoAlarm(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range map[string]func(testing.TB) stores.Store{
		"memstore":  func(testing.TB) stores.Store { return memstore.New() },
		"filestore": func(t testing.TB) stores.Store { return openFileStore(t, t.TempDir()) },
	} {
		t.Run(name, func(t *testing.T) {
			v := openVault(t, openDB(t, newStore(t), "alice", "s3cret"), "books")
			c, h := stubsOf(t, v)
			const total = 200
			ids := make([]string, total)
			for i := range ids {
				ids[i] = fmt.Sprintf("t-%03d", i)
			}
			var done atomic.Bool
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for w := range 2 {
				wg.Go(func() {
					for i := w; i < total; i += 2 {
						if _, err := h.Put(ctx, ids[i], Stub{Total: i}); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			var settle, audit sync.WaitGroup
			settle.Go(func() {
				for !done.Load() {
					if _, err := h.Settle(ctx); err != nil && !errors.Is(err, numbering.ErrPassRunning) {
						errs <- err
						return
					}
				}
			})
			audit.Go(func() {
				for !done.Load() {
					if _, err := h.Audit(ctx); err != nil {
						errs <- fmt.Errorf("audit: %w", err)
						return
					}
					r, err := v.Audit().Verify(ctx)
					if err == nil && !r.OK() {
						err = errors.New("the ledger does not verify")
					}
					if err != nil {
						errs <- fmt.Errorf("verify: %w", err)
						return
					}
				}
			})
			wg.Wait()
			done.Store(true)
			settle.Wait()
			audit.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			_, err := h.Settle(ctx)
			require.NoError(t, err)
			checkStubs(t, v, c, h, ids)
		})
	}
}

// Mid-batch, Lookup of an id numbered, deleted and handed off again shows
// the number the batch in flight gives the new record, not the old one and
// not "pending".
func TestNumberedLookupMidBatchOfReusedID(t *testing.T) {
	ctx := context.Background()
	var armed atomic.Bool
	st := faultstore.New(openFileStore(t, t.TempDir()), faultstore.Options{
		After: func(op faultstore.Op, key string) error {
			if op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "/_numbering/ticket/head") && armed.CompareAndSwap(true, false) {
				return errors.New("crash after commit")
			}
			return nil
		},
	})
	v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
	c, h := stubsOf(t, v)
	_, err := h.Put(ctx, "a", Stub{Total: 1})
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	require.NoError(t, err)
	require.NoError(t, h.Delete(ctx, "a"))
	r, err := h.Put(ctx, "a", Stub{Total: 2})
	require.NoError(t, err)

	armed.Store(true)
	_, err = h.Settle(ctx)
	require.ErrorContains(t, err, "crash after commit")
	a, ok, err := h.Series().Lookup(ctx, "a")
	require.NoError(t, err)
	require.True(t, ok, "in the batch in flight")
	assert.Equal(t, uint64(2), a.Number)
	assert.Equal(t, r.Provisional, a.Provisional)
	a, ok, err = h.Lookup(ctx, r.Provisional)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(2), a.Number)

	rep, err := h.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{Assigned: 1, Resumed: 1}, rep)
	g, err := h.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "T-00002", g.Value.No)
	_ = c
}
