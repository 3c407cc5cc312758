package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/cas"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file prove the read-modify-write of collections:
// Update, GetRecord and the conditional writes, on every store with
// transactions (memory, badger on disk, PostgreSQL under
// scripts/with-postgres), and what a store without them refuses.

// txStores are the stores with transactions: memAndBadger and PostgreSQL
// (skipped without NOYDB_PG_URL, failing under CI=true).
func txStores() map[string]func(testing.TB) stores.Store {
	out := memAndBadger()
	out["pgstore"] = func(t testing.TB) stores.Store { return pgtest.Open(t, nil) }
	return out
}

// counterRec is a record with one field that Update increments.
type counterRec struct {
	Name  string
	Count int
}

// 64 goroutines × 100 Updates of one field of one record: the final value
// is exactly 6,400, the record is at revision 6,401 (its Put and one per
// Update), the ledger holds exactly one entry per write of the record, and
// Verify, running next to the writers the whole time, never raises an
// alarm on the honest busy store.
func TestUpdateCounterExact(t *testing.T) {
	const workers, each = 64, 100
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := openVault(t, openDB(t, newStore(t), "firm", "s"), "books")
			counters := vault.CollectionOf[counterRec](v, "counters")
			require.NoError(t, counters.Put(ctx, "c", counterRec{Name: "hits"}))

			stop := make(chan struct{})
			var verifies atomic.Int64
			verifyErr := make(chan error, 1)
			go func() {
				defer close(verifyErr)
				for {
					rep, err := v.Audit().Verify(ctx)
					if err == nil && !rep.OK() {
						err = fmt.Errorf("verify at %d: %w", rep.FirstBad, rep.Problem)
					}
					if err != nil {
						verifyErr <- err
						return
					}
					verifies.Add(1)
					select {
					case <-stop:
						return
					default:
					}
				}
			}()

			var wg sync.WaitGroup
			errs := make(chan error, workers*each)
			for range workers {
				wg.Go(func() {
					for range each {
						if _, err := counters.Update(ctx, "c", func(r *counterRec) error {
							r.Count++
							return nil
						}); err != nil {
							errs <- err
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			close(errs)
			for err := range errs {
				assert.NoError(t, err)
			}
			assert.NoError(t, <-verifyErr)
			assert.Positive(t, verifies.Load(), "Verify ran next to the writers")

			got, err := counters.GetRecord(ctx, "c")
			require.NoError(t, err)
			assert.Equal(t, workers*each, got.Value.Count)
			assert.Equal(t, "hits", got.Value.Name)
			assert.Equal(t, uint64(workers*each+1), got.Revision)
			assert.Equal(t, "firm", got.Author)

			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK(), "ledger verifies: %v", rep.Problem)
			var revs []uint64
			for e, err := range v.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				if e.Collection == "counters" && e.ID == "c" {
					revs = append(revs, e.Revision)
				}
			}
			require.Len(t, revs, workers*each+1, "one ledger entry per write")
			for i, r := range revs {
				assert.Equal(t, uint64(i+1), r, "ledger entry %d", i)
			}
		})
	}
}

// GetRecord returns the value with its revision, modification time and
// author; List fills them too; each write moves the revision by one.
func TestGetRecord(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := openVault(t, openDB(t, newStore(t), "firm", "s"), "books")
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			require.NoError(t, invoices.Put(ctx, "i-1", Invoice{Customer: "ACME", Total: 10}))
			r1, err := invoices.GetRecord(ctx, "i-1")
			require.NoError(t, err)
			assert.Equal(t, "i-1", r1.ID)
			assert.Equal(t, uint64(1), r1.Revision)
			assert.Equal(t, Invoice{Customer: "ACME", Total: 10}, r1.Value)
			assert.Equal(t, "firm", r1.Author)
			assert.False(t, r1.Modified.IsZero())

			require.NoError(t, invoices.Put(ctx, "i-1", Invoice{Customer: "ACME", Total: 11}))
			r2, err := invoices.GetRecord(ctx, "i-1")
			require.NoError(t, err)
			assert.Equal(t, uint64(2), r2.Revision)
			assert.Equal(t, 11, r2.Value.Total)

			for r, err := range invoices.List(ctx) {
				require.NoError(t, err)
				assert.Equal(t, r2.Revision, r.Revision)
				assert.Equal(t, "firm", r.Author)
				assert.True(t, r.Modified.Equal(r2.Modified))
			}

			_, err = invoices.GetRecord(ctx, "missing")
			assert.ErrorIs(t, err, vault.ErrNotFound)
		})
	}
}

// PutIf writes only on the revision given (0: only a new record); a
// mismatch is a *ConflictError with both revisions, and nothing is
// written. DeleteIf likewise.
func TestConditionalWrites(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openVault(t, openDB(t, st, "firm", "s"), "books")
			invoices := vault.CollectionOf[Invoice](v, "invoices")

			require.NoError(t, invoices.PutIf(ctx, "i-1", Invoice{Total: 1}, 0), "rev 0 creates")
			before := snapshot(t, st)

			err := invoices.PutIf(ctx, "i-1", Invoice{Total: 2}, 0)
			var ce *vault.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, vault.ErrConflict)
			assert.NotErrorIs(t, err, vault.ErrNotFound)
			assert.NotErrorIs(t, err, stores.ErrConflict, "not a store conflict: no retry loop retries it")
			assert.Equal(t, vault.ConflictError{Collection: "invoices", ID: "i-1", Want: 0, Got: 1}, *ce)

			err = invoices.PutIf(ctx, "i-1", Invoice{Total: 2}, 7)
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, uint64(7), ce.Want)
			assert.Equal(t, uint64(1), ce.Got)

			err = invoices.PutIf(ctx, "i-2", Invoice{Total: 2}, 1)
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, uint64(0), ce.Got)
			assert.ErrorIs(t, err, vault.ErrNotFound, "no record: matches ErrNotFound too")

			err = invoices.DeleteIf(ctx, "i-1", 2)
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, vault.ConflictError{Collection: "invoices", ID: "i-1", Want: 2, Got: 1}, *ce)
			assert.ErrorIs(t, invoices.DeleteIf(ctx, "i-1", 0), vault.ErrInvalidArgument)
			assert.Equal(t, before, snapshot(t, st), "no mismatch wrote anything")

			require.NoError(t, invoices.PutIf(ctx, "i-1", Invoice{Total: 3}, 1))
			r, err := invoices.GetRecord(ctx, "i-1")
			require.NoError(t, err)
			assert.Equal(t, uint64(2), r.Revision)
			assert.Equal(t, 3, r.Value.Total)
			require.NoError(t, invoices.DeleteIf(ctx, "i-1", 2))
			_, err = invoices.Get(ctx, "i-1")
			assert.ErrorIs(t, err, vault.ErrNotFound)

			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
			assert.Equal(t, uint64(3), rep.Entries, "put, put, delete")
		})
	}
}

// Update returns fn's error as it is and writes nothing; a missing record
// is ErrNotFound; the record returned is the one stored.
func TestUpdateOutcomes(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openVault(t, openDB(t, st, "firm", "s"), "books")
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			require.NoError(t, invoices.Put(ctx, "i-1", Invoice{Total: 1}))
			before := snapshot(t, st)

			boom := errors.New("boom")
			_, err := invoices.Update(ctx, "i-1", func(i *Invoice) error {
				i.Total = 99
				return boom
			})
			assert.Same(t, boom, err, "fn's error as it is")
			assert.Panics(t, func() {
				_, _ = invoices.Update(ctx, "i-1", func(i *Invoice) error {
					i.Total = 99
					panic("fn panicked")
				})
			})
			_, err = invoices.Update(ctx, "nope", func(*Invoice) error { return nil })
			assert.ErrorIs(t, err, vault.ErrNotFound)
			assert.Equal(t, before, snapshot(t, st), "nothing written")

			r, err := invoices.Update(ctx, "i-1", func(i *Invoice) error {
				i.Total += 41
				return nil
			})
			require.NoError(t, err)
			assert.Equal(t, 42, r.Value.Total)
			assert.Equal(t, uint64(2), r.Revision)
			assert.Equal(t, "firm", r.Author)
			got, err := invoices.GetRecord(ctx, "i-1")
			require.NoError(t, err)
			assert.Equal(t, r, got, "Update returns the record as stored")
		})
	}
}

// Bad input gets a typed error and changes nothing.
func TestRecordsBadInput(t *testing.T) {
	ctx := context.Background()
	st := memAndBadger()["memstore"](t)
	db := openDB(t, st, "firm", "s")
	v := openVault(t, db, "books")
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	require.NoError(t, invoices.Put(ctx, "i-1", Invoice{Total: 1}))
	seq := mustSeq(t, v, "inv")
	other := openVault(t, db, "other")
	otherSeq := mustSeq(t, other, "inv")
	before := snapshot(t, st)
	inc := func(i *Invoice) error { i.Total++; return nil }

	_, err := invoices.Update(ctx, "", inc)
	assert.ErrorIs(t, err, vault.ErrInvalidName)
	_, err = invoices.GetRecord(ctx, "a\x00b")
	assert.ErrorIs(t, err, vault.ErrInvalidName)
	assert.ErrorIs(t, invoices.PutIf(ctx, "", Invoice{}, 0), vault.ErrInvalidName)
	assert.ErrorIs(t, invoices.DeleteIf(ctx, "", 1), vault.ErrInvalidName)
	assert.ErrorIs(t, invoices.PutMany(ctx, map[string]Invoice{"ok": {}, "": {}}), vault.ErrInvalidName)
	assert.ErrorIs(t, invoices.DeleteMany(ctx, []string{"i-1", ""}), vault.ErrInvalidName)
	assert.ErrorIs(t, invoices.DeleteMany(ctx, []string{"i-1", "i-1"}), vault.ErrInvalidArgument)
	_, err = invoices.GetMany(ctx, []string{""})
	assert.ErrorIs(t, err, vault.ErrInvalidName)
	_, err = vault.CollectionOf[Invoice](v, "_reserved").Update(ctx, "i-1", inc)
	assert.ErrorIs(t, err, vault.ErrReservedName)

	_, err = invoices.Update(ctx, "i-1", nil)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	assert.ErrorIs(t, v.Update(ctx, nil), vault.ErrInvalidArgument)

	// Inside a transaction: bad ids, a nil or foreign sequence, a
	// collection of another vault; fn returns the error, nothing commits.
	for name, fn := range map[string]func(tx *vault.Tx) error{
		"bad id":          func(tx *vault.Tx) error { return invoices.In(tx).Put("", Invoice{}) },
		"nil sequence":    func(tx *vault.Tx) error { _, err := tx.Next(nil); return err },
		"foreign seq":     func(tx *vault.Tx) error { _, err := tx.Next(otherSeq); return err },
		"foreign coll":    func(tx *vault.Tx) error { return vault.CollectionOf[Invoice](other, "x").In(tx).Put("a", Invoice{}) },
		"wrong revision":  func(tx *vault.Tx) error { return invoices.In(tx).PutIf("i-1", Invoice{}, 5) },
		"delete rev 0":    func(tx *vault.Tx) error { return invoices.In(tx).DeleteIf("i-1", 0) },
		"delete missing":  func(tx *vault.Tx) error { return invoices.In(tx).Delete("nope") },
		"wrong del rev":   func(tx *vault.Tx) error { return invoices.In(tx).DeleteIf("i-1", 9) },
		"get missing":     func(tx *vault.Tx) error { _, err := invoices.In(tx).Get("nope"); return err },
		"cancelled in tx": func(tx *vault.Tx) error { return invoices.In(tx).Put("x", Invoice{}) },
	} {
		var err error
		if name == "cancelled in tx" {
			cctx, cancel := context.WithCancel(ctx)
			err = v.Update(cctx, func(tx *vault.Tx) error { cancel(); return fn(tx) })
			assert.ErrorIs(t, err, context.Canceled, name)
			continue
		}
		err = v.Update(ctx, fn)
		assert.Error(t, err, name)
		switch name {
		case "bad id":
			assert.ErrorIs(t, err, vault.ErrInvalidName, name)
		case "wrong revision", "wrong del rev":
			assert.ErrorIs(t, err, vault.ErrConflict, name)
		case "delete missing", "get missing":
			assert.ErrorIs(t, err, vault.ErrNotFound, name)
		default:
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, name)
		}
	}
	n, err := seq.Peek(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	// A Tx kept past its function refuses.
	var kept *vault.Tx
	require.NoError(t, v.Update(ctx, func(tx *vault.Tx) error { kept = tx; return nil }))
	assert.ErrorIs(t, invoices.In(kept).Put("late", Invoice{}), vault.ErrInvalidArgument)
	_, err = kept.Next(seq)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)

	// A cancelled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = invoices.Update(cctx, "i-1", inc)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = invoices.GetRecord(cctx, "i-1")
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, invoices.PutIf(cctx, "i-1", Invoice{}, 1), context.Canceled)
	assert.ErrorIs(t, invoices.PutMany(cctx, map[string]Invoice{"a": {}}), context.Canceled)
	assert.ErrorIs(t, v.Update(cctx, func(*vault.Tx) error { return nil }), context.Canceled)
	assert.Equal(t, before, snapshot(t, st), "no bad call wrote anything")

	// A closed vault.
	require.NoError(t, v.Close())
	_, err = invoices.Update(ctx, "i-1", inc)
	assert.ErrorIs(t, err, vault.ErrClosed)
	_, err = invoices.GetRecord(ctx, "i-1")
	assert.ErrorIs(t, err, vault.ErrClosed)
	assert.ErrorIs(t, invoices.PutIf(ctx, "i-1", Invoice{}, 1), vault.ErrClosed)
	assert.ErrorIs(t, invoices.DeleteIf(ctx, "i-1", 1), vault.ErrClosed)
	assert.ErrorIs(t, invoices.PutMany(ctx, map[string]Invoice{"a": {}}), vault.ErrClosed)
	_, err = invoices.GetMany(ctx, []string{"i-1"})
	assert.ErrorIs(t, err, vault.ErrClosed)
	assert.ErrorIs(t, invoices.DeleteMany(ctx, []string{"i-1"}), vault.ErrClosed)
	assert.ErrorIs(t, v.Update(ctx, func(*vault.Tx) error { return nil }), vault.ErrClosed)
	assert.Equal(t, before, snapshot(t, st))
}

// On a store without transactions, PutIf and Update work by
// compare-and-swap; DeleteIf, the Many calls and v.Update are refused with
// stores.ErrNotSupported, writing nothing.
func TestRecordsWithoutTransactions(t *testing.T) {
	ctx := context.Background()
	st, err := filestore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	v := openVault(t, openDB(t, st, "firm", "s"), "books")
	invoices := vault.CollectionOf[Invoice](v, "invoices")

	require.NoError(t, invoices.PutIf(ctx, "i-1", Invoice{Total: 1}, 0))
	err = invoices.PutIf(ctx, "i-1", Invoice{Total: 2}, 0)
	var ce *vault.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, uint64(1), ce.Got)

	// Without transactions, writers of one process are not combined: they
	// race by compare-and-swap, and under load one can spend its retry
	// budget (a ConflictError, nothing written), as an app would see; it
	// calls again, and every increment lands exactly once.
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				for attempt := 0; ; attempt++ {
					_, err := invoices.Update(ctx, "i-1", func(i *Invoice) error { i.Total++; return nil })
					if errors.Is(err, vault.ErrConflict) && attempt < 8 {
						continue
					}
					assert.NoError(t, err)
					break
				}
			}
		})
	}
	wg.Wait()
	r, err := invoices.GetRecord(ctx, "i-1")
	require.NoError(t, err)
	assert.Equal(t, 1+workers*each, r.Value.Total)
	assert.Equal(t, uint64(1+workers*each), r.Revision)

	before := snapshot(t, st)
	assert.ErrorIs(t, invoices.DeleteIf(ctx, "i-1", r.Revision), stores.ErrNotSupported)
	assert.ErrorIs(t, invoices.PutMany(ctx, map[string]Invoice{"a": {}}), stores.ErrNotSupported)
	_, err = invoices.GetMany(ctx, []string{"i-1"})
	assert.ErrorIs(t, err, stores.ErrNotSupported)
	assert.ErrorIs(t, invoices.DeleteMany(ctx, []string{"i-1"}), stores.ErrNotSupported)
	ran := false
	assert.ErrorIs(t, v.Update(ctx, func(*vault.Tx) error { ran = true; return nil }), stores.ErrNotSupported)
	assert.False(t, ran)
	assert.Equal(t, before, snapshot(t, st))
	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, rep.OK())
}

// PutMany, GetMany and DeleteMany commit all their records at once, or
// none: a DeleteMany naming a missing id deletes nothing.
func TestManyRecords(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openVault(t, openDB(t, st, "firm", "s"), "books")
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			batch := map[string]Invoice{}
			for i := range 50 {
				batch[fmt.Sprintf("i-%02d", i)] = Invoice{Total: i}
			}
			require.NoError(t, invoices.PutMany(ctx, batch))
			require.NoError(t, invoices.PutMany(ctx, nil), "nothing to write")
			n, err := invoices.Count(ctx)
			require.NoError(t, err)
			assert.Equal(t, 50, n)

			got, err := invoices.GetMany(ctx, []string{"i-07", "i-49", "i-07", "nope"})
			require.NoError(t, err)
			require.Len(t, got, 2)
			assert.Equal(t, 7, got["i-07"].Value.Total)
			assert.Equal(t, uint64(1), got["i-49"].Revision)
			assert.Equal(t, "firm", got["i-49"].Author)

			before := snapshot(t, st)
			err = invoices.DeleteMany(ctx, []string{"i-01", "i-02", "nope"})
			assert.ErrorIs(t, err, vault.ErrNotFound)
			assert.Equal(t, before, snapshot(t, st), "all or nothing")

			require.NoError(t, invoices.DeleteMany(ctx, []string{"i-01", "i-02"}))
			got, err = invoices.GetMany(ctx, []string{"i-01", "i-02", "i-03"})
			require.NoError(t, err)
			assert.Len(t, got, 1)

			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
			assert.Equal(t, uint64(52), rep.Entries, "50 puts, 2 deletes")
		})
	}
}

// When every attempt of the retry budget loses to another writer, Update
// fails with a *ConflictError matching ErrConflict (and the exhausted
// budget's own error) and writes nothing: on a store with transactions
// (every commit conflicts) and on one without (every compare-and-swap
// loses).
func TestUpdateBudgetExhausted(t *testing.T) {
	newFile := func(t testing.TB) stores.Store {
		st, err := filestore.Open(t.TempDir(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	cases := map[string]struct {
		newStore func(testing.TB) stores.Store
		op       faultstore.Op
		also     error
	}{
		"transactions":     {memAndBadger()["memstore"], faultstore.OpUpdate, ledger.ErrContention},
		"compare-and-swap": {newFile, faultstore.OpCompareAndSwap, cas.ErrExhausted},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := tc.newStore(t)
			var armed atomic.Bool
			st := faultstore.New(inner, faultstore.Options{Before: func(op faultstore.Op, _ string) error {
				if op == tc.op && armed.Load() {
					return stores.ErrConflict
				}
				return nil
			}})
			v := openVault(t, openDB(t, st, "firm", "s"), "books")
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			require.NoError(t, invoices.Put(ctx, "i-1", Invoice{Total: 1}))
			before := snapshot(t, inner)

			armed.Store(true)
			runs := 0
			_, err := invoices.Update(ctx, "i-1", func(i *Invoice) error { runs++; i.Total++; return nil })
			armed.Store(false)
			var ce *vault.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, vault.ErrConflict)
			assert.ErrorIs(t, err, tc.also)
			assert.NotErrorIs(t, err, vault.ErrNotFound)
			assert.Equal(t, "invoices", ce.Collection)
			assert.Equal(t, "i-1", ce.ID)
			if tc.op == faultstore.OpCompareAndSwap {
				assert.Equal(t, 16, ce.Attempts)
				assert.Equal(t, 16, runs, "fn ran once per attempt")
			}
			assert.Equal(t, before, snapshot(t, inner), "nothing written")
		})
	}
}
