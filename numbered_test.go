package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// Stub is the record type the numbered-handle tests write: No receives
// the number through the setter.
type Stub struct {
	No    string
	Desk  string
	Total int
}

const ticketFormat = "T-{seq:05}"

// setStub is the typed setter every test gives NumberingOf.
func setStub(t *Stub, s sequence.Serial) { t.No = s.Formatted }

// numberedStores are the stores the numbered-handle proofs run on: three
// with atomic compare-and-swap and transactions (numbered at write time),
// and the file store (numbered by a pass). PostgreSQL needs
// scripts/with-postgres; under CI=true it fails rather than skips without it.
func numberedStores() map[string]func(testing.TB) stores.Store {
	m := memAndBadger()
	m["pgstore"] = func(t testing.TB) stores.Store { return pgtest.Open(t, nil) }
	m["filestore"] = func(t testing.TB) stores.Store { return openFileStore(t, t.TempDir()) }
	return m
}

// openFileStore opens a file store on dir, closed when the test ends.
// NoSync: the tests kill processes, not machines.
func openFileStore(t testing.TB, dir string) *filestore.Store {
	t.Helper()
	st, err := filestore.Open(dir, &filestore.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// stubsOf returns the tickets collection of v and its numbered handle.
func stubsOf(t testing.TB, v *vault.Vault) (*vault.Collection[Stub], *vault.Numbered[Stub]) {
	t.Helper()
	c := vault.CollectionOf[Stub](v, "tickets")
	h, err := vault.NumberingOf(c, "ticket", sequence.Options{Format: ticketFormat}, setStub)
	require.NoError(t, err)
	return c, h
}

// checkStubs checks, through the collection and the handle, that the
// records ids carry exactly the numbers 1..len(ids), each its own (the
// setter's field and the handle's Serial agree), that the ledger verifies
// and that the series audits clean. It returns each id's number.
func checkStubs(t testing.TB, v *vault.Vault, c *vault.Collection[Stub], h *vault.Numbered[Stub], ids []string) map[string]uint64 {
	t.Helper()
	ctx := context.Background()
	byID := map[string]uint64{}
	var numbers []uint64
	for r, err := range c.List(ctx) {
		require.NoError(t, err)
		var n uint64
		_, err := fmt.Sscanf(r.Value.No, "T-%05d", &n)
		require.NoError(t, err, "record %s carries %q", r.ID, r.Value.No)
		byID[r.ID] = n
		numbers = append(numbers, n)
	}
	require.Len(t, byID, len(ids), "every record is there")
	slices.Sort(numbers)
	for i, n := range numbers {
		require.Equal(t, uint64(i+1), n, "numbers are exactly 1..%d", len(ids))
	}
	for _, id := range ids {
		r, err := h.Get(ctx, id)
		require.NoError(t, err)
		assert.False(t, r.Pending, "%s is not pending", id)
		assert.Equal(t, byID[id], r.Serial.N, "%s: the handle and the record agree", id)
		assert.Equal(t, fmt.Sprintf("T-%05d", byID[id]), r.Value.No)
	}
	vr, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, vr.OK(), "ledger verifies")
	a, err := h.Audit(ctx)
	require.NoError(t, err)
	assert.True(t, a.Clean(), "audit clean: %+v", a)
	assert.Equal(t, len(ids), a.Numbered(), "the audit accounts for every number")
	return byID
}

// 1,000 tickets written through the handle by 8 goroutines end numbered
// exactly 1..1,000 on every store: at write time where the store has atomic
// compare-and-swap, by one pass on the file store, in provisional order.
func TestNumberedThousandEightWriters(t *testing.T) {
	for name, newStore := range numberedStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
			c, h := stubsOf(t, v)
			assert.Equal(t, st.Capabilities().CASAtomic, h.Online())

			const total, writers = 1000, 8
			ids := make([]string, total)
			recs := make([]vault.NumberedRecord[Stub], total)
			for i := range ids {
				ids[i] = fmt.Sprintf("t-%04d", i)
			}
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Go(func() {
					for i := w; i < total; i += writers {
						r, err := h.Put(ctx, ids[i], Stub{Desk: fmt.Sprint("desk-", w), Total: i})
						if err != nil {
							errs <- err
							return
						}
						recs[i] = r
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for i, r := range recs {
				if h.Online() {
					require.False(t, r.Pending)
					require.Equal(t, fmt.Sprintf("T-%05d", r.Serial.N), r.Value.No, "the setter ran on what was written")
				} else {
					require.True(t, r.Pending, "%s", ids[i])
					require.NotEmpty(t, r.Provisional)
					require.Empty(t, r.Value.No)
				}
			}
			if !h.Online() {
				g, err := h.Get(ctx, ids[0])
				require.NoError(t, err)
				assert.True(t, g.Pending, "reading a pending record says so")
				assert.Equal(t, recs[0].Provisional, g.Provisional)
				_, ok, err := h.Lookup(ctx, recs[0].Provisional)
				require.NoError(t, err)
				assert.False(t, ok, "no number before the pass")

				rep, err := h.Settle(ctx)
				require.NoError(t, err)
				assert.Equal(t, numbering.PassReport{Batch: 1, First: 1, Last: total, Assigned: total}, rep)
			} else {
				rep, err := h.Settle(ctx)
				require.NoError(t, err)
				assert.Equal(t, numbering.PassReport{}, rep, "nothing to settle online")
			}
			byID := checkStubs(t, v, c, h, ids)
			if h.Online() {
				return
			}
			// One pass: numbers follow provisional order exactly.
			order := slices.Clone(recs)
			slices.SortFunc(order, func(a, b vault.NumberedRecord[Stub]) int {
				return strings.Compare(a.Provisional+a.ID, b.Provisional+b.ID)
			})
			for i, r := range order {
				require.Equal(t, uint64(i+1), byID[r.ID], "number %d goes to the %d-th provisional id", i+1, i+1)
				a, ok, err := h.Lookup(ctx, r.Provisional)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, r.ID, a.RecordID)
				require.Equal(t, uint64(i+1), a.Number)
			}
		})
	}
}

// A copy read before the pass numbered a record, written back through the
// handle, keeps the record's number (the setter applies it again from the
// record's sealed metadata); written back through the plain collection, the
// number is gone from the content but the handle's Get still shows it and
// the next Put through the handle restores it. A second Put never takes a
// second number, on either path.
func TestNumberedStaleCopyKeepsNumber(t *testing.T) {
	for name, newStore := range numberedStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
			c, h := stubsOf(t, v)
			_, err := h.Put(ctx, "a", Stub{Total: 1})
			require.NoError(t, err)
			stale, err := c.Get(ctx, "a") // read before its pass
			require.NoError(t, err)
			_, err = h.Settle(ctx)
			require.NoError(t, err)
			stale.No = "" // as read before the pass (online, the number came with the Put)

			stale.Total = 2
			r, err := h.Put(ctx, "a", stale)
			require.NoError(t, err)
			assert.False(t, r.Pending)
			assert.Equal(t, Stub{No: "T-00001", Total: 2}, r.Value)

			stale.Total = 3
			require.NoError(t, c.Put(ctx, "a", stale)) // around the handle
			got, err := c.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, Stub{Total: 3}, got, "the plain collection wrote what it was given")
			g, err := h.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, Stub{No: "T-00001", Total: 3}, g.Value, "the handle shows the number it carries")
			assert.Equal(t, uint64(1), g.Serial.N)

			r, err = h.Put(ctx, "a", got)
			require.NoError(t, err)
			assert.Equal(t, Stub{No: "T-00001", Total: 3}, r.Value)
			_, err = h.Settle(ctx)
			require.NoError(t, err)
			checkStubs(t, v, c, h, []string{"a"})
		})
	}
}

// Bad input gets a typed error and writes nothing.
func TestNumberedBadInput(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range map[string]func(testing.TB) stores.Store{
		"memstore":  func(testing.TB) stores.Store { return memstore.New() },
		"filestore": func(t testing.TB) stores.Store { return openFileStore(t, t.TempDir()) },
	} {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			db := openDB(t, st, "alice", "s3cret")
			v := openVault(t, db, "books")
			c := vault.CollectionOf[Stub](v, "tickets")
			before := snapshot(t, st)

			_, err := vault.NumberingOf(c, "ticket", sequence.Options{}, nil)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "nil setter")
			_, err = vault.NumberingOf[Stub](nil, "ticket", sequence.Options{}, setStub)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "nil collection")
			for _, series := range []string{"", "a/b", "bad\x00", strings.Repeat("s", 201)} {
				_, err = vault.NumberingOf(c, series, sequence.Options{}, setStub)
				assert.ErrorIs(t, err, vault.ErrInvalidArgument, "series %q", series)
			}
			for _, coll := range []string{"", "_numbering", "a/b"} {
				_, err = vault.NumberingOf(vault.CollectionOf[Stub](v, coll), "ticket", sequence.Options{}, setStub)
				assert.ErrorIs(t, err, vault.ErrInvalidArgument, "collection %q", coll)
			}
			_, err = vault.NumberingOf(c, "ticket", sequence.Options{Format: "{seq"}, setStub)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "bad format")
			_, err = vault.NumberingOf(c, "ticket", sequence.Options{Partition: []any{2026}}, setStub)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "partition")

			_, h := stubsOf(t, v)
			_, err = h.Put(ctx, "", Stub{})
			assert.ErrorIs(t, err, vault.ErrInvalidName, "empty id")
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			_, err = h.Put(cancelled, "t-1", Stub{})
			assert.ErrorIs(t, err, context.Canceled)
			_, err = h.Settle(cancelled)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, before, snapshot(t, st), "nothing written")

			// Another format than the one stored with the series.
			_, err = h.Put(ctx, "t-1", Stub{})
			require.NoError(t, err)
			other, err := vault.NumberingOf(c, "ticket", sequence.Options{Format: "X-{seq}"}, setStub)
			require.NoError(t, err)
			mid := snapshot(t, st)
			_, err = other.Put(ctx, "t-2", Stub{})
			assert.ErrorIs(t, err, numbering.ErrMismatch)
			_, err = other.Settle(ctx)
			assert.ErrorIs(t, err, numbering.ErrMismatch)
			assert.Equal(t, mid, snapshot(t, st), "nothing written")
			adopt, err := vault.NumberingOf(c, "ticket", sequence.Options{}, setStub)
			require.NoError(t, err)
			_, err = adopt.Settle(ctx)
			require.NoError(t, err)
			g, err := adopt.Get(ctx, "t-1")
			require.NoError(t, err)
			assert.Equal(t, "T-00001", g.Value.No, "an empty format adopts the stored one")

			require.NoError(t, v.Close())
			mid = snapshot(t, st)
			_, err = h.Put(ctx, "t-3", Stub{})
			assert.ErrorIs(t, err, vault.ErrClosed)
			_, err = h.Settle(ctx)
			assert.ErrorIs(t, err, vault.ErrClosed)
			_, _, err = h.Lookup(ctx, g.Provisional)
			assert.ErrorIs(t, err, vault.ErrClosed)
			assert.Equal(t, mid, snapshot(t, st), "nothing written")
		})
	}
}

// Next, NextSerial, Claim and SeedTo keep refusing on a store without
// atomic compare-and-swap, and say which handle works there.
func TestNumberedOfflineRefusalNamesHandle(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, openFileStore(t, t.TempDir()), "alice", "s3cret"), "books")
	q, err := v.Sequence("ticket", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	assert.ErrorIs(t, err, sequence.ErrOffline)
	assert.Contains(t, err.Error(), "vault.NumberingOf")
	_, err = q.NextSerial(ctx)
	assert.ErrorIs(t, err, sequence.ErrOffline)
	_, err = q.Claim(ctx, sequence.NewRequestID())
	assert.ErrorIs(t, err, sequence.ErrOffline)
	assert.ErrorIs(t, q.SeedTo(ctx, 5), sequence.ErrOffline)
	assert.False(t, errors.Is(err, vault.ErrInvalidArgument))
}

// A Put that dies between its handoff entry and its record (here: the
// record write fails) leaves an entry no pass numbers or drops: the record
// is clearly not numbered (it does not exist), and the next Put of the id
// hands it off afresh, after which the pass drops the old entry and numbers
// the record once. A pending record deleted through the handle takes its
// entry with it.
func TestNumberedHandoffWithoutRecord(t *testing.T) {
	ctx := context.Background()
	var failRecord atomic.Bool
	st := faultstore.New(openFileStore(t, t.TempDir()), faultstore.Options{
		Before: func(op faultstore.Op, key string) error {
			if op == faultstore.OpCompareAndSwap && strings.Contains(key, "/stubs/") && failRecord.Load() {
				return faultstore.ErrInjected
			}
			return nil
		},
	})
	v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
	c := vault.CollectionOf[Stub](v, "stubs")
	h, err := vault.NumberingOf(c, "stub", sequence.Options{Format: ticketFormat}, setStub)
	require.NoError(t, err)
	require.False(t, h.Online())

	failRecord.Store(true)
	_, err = h.Put(ctx, "a", Stub{Total: 1})
	require.ErrorIs(t, err, faultstore.ErrInjected)
	failRecord.Store(false)
	rep, err := h.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{Waiting: 1}, rep, "the entry waits for its record")
	_, err = h.Get(ctx, "a")
	assert.ErrorIs(t, err, vault.ErrNotFound)

	r, err := h.Put(ctx, "a", Stub{Total: 2})
	require.NoError(t, err)
	require.True(t, r.Pending)
	_, err = h.Put(ctx, "b", Stub{Total: 3})
	require.NoError(t, err)
	require.NoError(t, h.Delete(ctx, "b"))
	rep, err = h.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{Batch: 1, First: 1, Last: 1, Assigned: 1, Skipped: 1}, rep,
		"a numbered once, its first entry dropped; b's entry went with it")
	pending, err := h.Series().Pending(ctx)
	require.NoError(t, err)
	assert.Zero(t, pending)
	a, ok, err := h.Lookup(ctx, r.Provisional)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "a", a.RecordID)
	checkStubs(t, v, c, h, []string{"a"})
}

// ticketNumbering returns the deferred-numbering series that numbers the
// tickets of v (their No field), for the tests of Close and pins.
func ticketNumbering(t testing.TB, v *vault.Vault) *numbering.Series {
	t.Helper()
	h, err := vault.NumberingOf(vault.CollectionOf[Ticket](v, "tickets"), "ticket", sequence.Options{},
		func(tk *Ticket, s sequence.Serial) { tk.No = s.N })
	require.NoError(t, err)
	return h.Series()
}

// A record numbered at write time cannot get a second number from a pass
// of the same series.
func TestNumberedOnlineRecordRefusesDeferredNumber(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "books")
	c, h := stubsOf(t, v)
	require.True(t, h.Online())
	r, err := h.Put(ctx, "a", Stub{Total: 1})
	require.NoError(t, err)
	require.Equal(t, uint64(1), r.Serial.N)
	_, err = h.Series().Enqueue(ctx, "a")
	assert.ErrorIs(t, err, numbering.ErrAlreadyNumbered)
	rep, err := h.Settle(ctx)
	require.NoError(t, err)
	assert.Equal(t, numbering.PassReport{}, rep)
	checkStubs(t, v, c, h, []string{"a"})
}
