package numbering_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// storeKinds are the paths a pass takes: a transactional store, the same
// store with compare-and-swap only, and the file store (no atomic CAS).
var storeKinds = []struct {
	name string
	open func(tb testing.TB) (stores.Store, numbering.Options)
}{
	{"tx", func(testing.TB) (stores.Store, numbering.Options) { return memstore.New(), receiptOpts }},
	{"cas", func(testing.TB) (stores.Store, numbering.Options) {
		return faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true}), receiptOpts
	}},
	{"file", func(tb testing.TB) (stores.Store, numbering.Options) {
		return openFileStore(tb, tb.TempDir()), receiptOpts
	}},
}

func TestEnqueuePassLookup(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			st, opts := kind.open(t)
			d := openDevice(t, "till-1", st, opts)
			var ids []string
			for i := range 25 {
				id := fmt.Sprintf("r-%02d", 24-i) // ids against provisional order
				p := d.write(t, id, i)
				assert.Len(t, p, 36)
				ids = append(ids, id)
				_, ok, err := d.series.Lookup(ctx, id)
				require.NoError(t, err)
				assert.False(t, ok, "numbered before a pass")
			}
			n, err := d.series.Pending(ctx)
			require.NoError(t, err)
			assert.Equal(t, 25, n)

			rep, err := d.series.RunPass(ctx)
			require.NoError(t, err)
			assert.Equal(t, numbering.PassReport{Batch: 1, First: 1, Last: 25, Assigned: 25}, rep)

			got := checkNumbered(t, d, ids)
			for i, id := range ids {
				// Enqueued in this order, so numbered in this order.
				assert.Equal(t, uint64(i+1), got[id].Number, id)
				a, ok, err := d.series.Lookup(ctx, id)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, got[id], a)
				assert.Equal(t, fmt.Sprintf("R-%05d", i+1), a.Formatted)
			}
			checkLedger(t, d, got)

			// A pass with nothing to do writes nothing.
			before := snapshot(t, st)
			rep, err = d.series.RunPass(ctx)
			require.NoError(t, err)
			assert.Zero(t, rep)
			assert.Equal(t, before, snapshot(t, st))

			// The next records continue the series.
			ids = append(ids, "late-1", "late-2")
			d.write(t, "late-1", 1)
			d.write(t, "late-2", 2)
			rep, err = d.series.RunPass(ctx)
			require.NoError(t, err)
			assert.Equal(t, numbering.PassReport{Batch: 2, First: 26, Last: 27, Assigned: 2}, rep)
			got = checkNumbered(t, d, ids)
			assert.Equal(t, uint64(2), got["late-2"].Batch)
			checkLedger(t, d, got)
		})
	}
}

func TestPlainNumber(t *testing.T) {
	ctx := context.Background()
	opts := numbering.Options{Collection: "tickets", Field: "seq"} // a json tag, matched case-insensitively
	d := openDevice(t, "till", memstore.New(), opts)
	type ticket struct {
		Seq  uint64 `json:"Seq"`
		Name string
	}
	tickets := vault.CollectionOf[ticket](d.v, "tickets")
	for _, id := range []string{"b", "a"} {
		require.NoError(t, tickets.Put(ctx, id, ticket{Name: id}))
		_, err := d.series.Enqueue(ctx, id)
		require.NoError(t, err)
	}
	_, err := d.series.RunPass(ctx)
	require.NoError(t, err)
	for id, want := range map[string]uint64{"b": 1, "a": 2} {
		tk, err := tickets.Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, ticket{Seq: want, Name: id}, tk)
		a, ok, err := d.series.Lookup(ctx, id)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, fmt.Sprint(want), a.Formatted)
	}
}

func TestEnqueueErrors(t *testing.T) {
	ctx := context.Background()
	d := openDevice(t, "till", memstore.New(), receiptOpts)
	_, err := d.series.Enqueue(ctx, "missing")
	assert.ErrorIs(t, err, numbering.ErrNotFound)
	for _, id := range []string{"", "a\x00b", strings.Repeat("x", numbering.MaxIDLen+1)} {
		_, err := d.series.Enqueue(ctx, id)
		assert.ErrorIs(t, err, numbering.ErrInvalid, "%q", id)
		_, _, err = d.series.Lookup(ctx, id)
		assert.ErrorIs(t, err, numbering.ErrInvalid, "%q", id)
	}

	// Enqueued twice: one number, in the first place.
	first := d.write(t, "a", 1)
	d.write(t, "b", 2)
	second, err := d.series.Enqueue(ctx, "a")
	require.NoError(t, err)
	assert.Less(t, first, second)
	rep, err := d.series.RunPass(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Assigned)
	assert.Equal(t, 1, rep.Skipped)
	got := checkNumbered(t, d, []string{"a", "b"})
	assert.Equal(t, uint64(1), got["a"].Number)
	assert.Equal(t, first, got["a"].Provisional)

	// Numbered records are not enqueued again.
	_, err = d.series.Enqueue(ctx, "a")
	assert.ErrorIs(t, err, numbering.ErrAlreadyNumbered)

	// A closed vault refuses.
	require.NoError(t, d.v.Close())
	_, err = d.series.Enqueue(ctx, "b")
	assert.ErrorIs(t, err, vault.ErrClosed)
	_, err = d.series.RunPass(ctx)
	assert.ErrorIs(t, err, vault.ErrClosed)
}

func TestValidation(t *testing.T) {
	d := openDevice(t, "till", memstore.New(), receiptOpts)
	for _, tc := range []struct {
		series string
		opts   numbering.Options
	}{
		{"", receiptOpts},
		{"a/b", receiptOpts},
		{"a\nb", receiptOpts},
		{"\xff", receiptOpts},
		{strings.Repeat("s", numbering.MaxSeriesLen+1), receiptOpts},
		{"ok", numbering.Options{Field: "Number"}},
		{"ok", numbering.Options{Collection: "_ledger", Field: "Number"}},
		{"ok", numbering.Options{Collection: "a/b", Field: "Number"}},
		{"ok", numbering.Options{Collection: "receipts"}},
		{"ok", numbering.Options{Collection: "receipts", Field: "Number", Format: "R-{n}"}},
		{"ok", numbering.Options{Collection: "receipts", Field: "Number", Format: "R-{partition.0}-{seq}"}},
		{"ok", numbering.Options{Collection: "receipts", Field: "Number", Format: "no token"}},
		{"ok", numbering.Options{Collection: "receipts", Field: "Number", Workers: -1}},
	} {
		//lint:ignore SA1019 these tests cover the deprecated JSON-field API too
		_, err := d.v.Numbering(tc.series, tc.opts)
		assert.ErrorIs(t, err, numbering.ErrInvalid, "%q %+v", tc.series, tc.opts)
	}
	//lint:ignore SA1019 these tests cover the deprecated JSON-field API too
	_, err := d.v.Numbering("ok", numbering.Options{Collection: "receipts", Field: "Number", Format: "{seq"})
	var ve *sequence.ValidationError
	assert.ErrorAs(t, err, &ve)
}

func TestMismatchedCollection(t *testing.T) {
	ctx := context.Background()
	d := openDevice(t, "till", memstore.New(), receiptOpts)
	d.write(t, "a", 1)
	_, err := d.series.RunPass(ctx)
	require.NoError(t, err)
	//lint:ignore SA1019 these tests cover the deprecated JSON-field API too
	other, err := d.v.Numbering("receipts", numbering.Options{Collection: "invoices", Field: "Number"})
	require.NoError(t, err)
	_, err = other.RunPass(ctx)
	assert.ErrorIs(t, err, numbering.ErrMismatch)
	var me *numbering.MismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, numbering.MismatchError{Collection: true, Stored: "receipts", Asked: "invoices"}, *me)
	assert.Contains(t, err.Error(), `series numbers collection "receipts", not "invoices"`)
}

func TestDeletedRecords(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			inner, opts := kind.open(t)
			// Stop the first pass right after its commit point, as a crash would.
			// The commit point is the head's compare-and-swap, or on a store
			// with transactions the pass's first transaction, which writes
			// the head with the batch's chunks.
			var crash sync.Once
			var armed atomic.Bool
			crashed := false
			st := faultstore.New(inner, faultstore.Options{
				HideTransactor: kind.name != "tx",
				After: func(op faultstore.Op, key string) error {
					err := error(nil)
					if armed.Load() && (strings.HasSuffix(key, "/_numbering/receipts/head") || op == faultstore.OpUpdate) {
						crash.Do(func() { crashed, err = true, errors.New("crash after commit") })
					}
					return err
				},
			})
			d := openDevice(t, "till", st, opts)
			for _, id := range []string{"a", "gone-before", "b", "gone-after", "c"} {
				d.write(t, id, 1)
			}
			require.NoError(t, d.receipts.Delete(ctx, "gone-before"))
			armed.Store(true)
			_, err := d.series.RunPass(ctx)
			require.ErrorContains(t, err, "crash after commit")
			require.True(t, crashed)

			// Deleted before its batch was recorded: no number. After: its
			// number is void.
			a, ok, err := d.series.Lookup(ctx, "gone-after")
			require.NoError(t, err)
			require.True(t, ok, "in the recorded batch")
			assert.Equal(t, uint64(3), a.Number)
			_, ok, err = d.series.Lookup(ctx, "gone-before")
			require.NoError(t, err)
			assert.False(t, ok)
			require.NoError(t, d.receipts.Delete(ctx, "gone-after"))

			rep, err := d.series.RunPass(ctx)
			require.NoError(t, err)
			assert.Equal(t, numbering.PassReport{Resumed: 4, Assigned: 3, Voided: 1}, rep)

			want := map[string]uint64{"a": 1, "b": 2, "gone-after": 3, "c": 4}
			for id, n := range want {
				a, ok, err := d.series.Lookup(ctx, id)
				require.NoError(t, err)
				require.True(t, ok, id)
				assert.Equal(t, n, a.Number, id)
				assert.Equal(t, id == "gone-after", a.Voided, id)
			}
			var voided, assigned []uint64
			for e, err := range d.v.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				switch e.Kind {
				case ledger.NumberVoided:
					voided = append(voided, e.Number)
					assert.Equal(t, "gone-after", e.ID)
					assert.NotEmpty(t, e.Reason)
				case ledger.NumberAssigned:
					assigned = append(assigned, e.Number)
				}
			}
			assert.Equal(t, []uint64{3}, voided)
			assert.Equal(t, []uint64{1, 2, 4}, assigned)
			pending, err := d.series.Pending(ctx)
			require.NoError(t, err)
			assert.Zero(t, pending)
		})
	}
}

func TestPassRunning(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			st, opts := kind.open(t)
			d := openDevice(t, "till", st, opts)
			other := openDevice(t, "office", st, opts) // another DB on the same store
			var ids []string
			for i := range 10 {
				ids = append(ids, fmt.Sprint("r-", i))
				d.write(t, ids[i], i)
			}
			locked, release := make(chan struct{}), make(chan struct{})
			numbering.OnLocked(d.series, func() {
				close(locked)
				<-release
			})
			done := make(chan error, 1)
			go func() {
				_, err := d.series.RunPass(ctx)
				done <- err
			}()
			<-locked
			for _, s := range []*numbering.Series{d.series, other.series} {
				rep, err := s.RunPass(ctx)
				assert.ErrorIs(t, err, numbering.ErrPassRunning)
				assert.Zero(t, rep)
			}
			close(release)
			require.NoError(t, <-done)
			checkLedger(t, d, checkNumbered(t, d, ids))
		})
	}
}

func TestChunksAndProgress(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			st, opts := kind.open(t)
			d := openDevice(t, "till", st, opts)
			numbering.Tune(d.series, 7, 10)
			var ids []string
			for i := range 95 {
				ids = append(ids, fmt.Sprintf("r-%03d", i))
				d.write(t, ids[i], i)
			}
			chunks := 0
			locked := false
			numbering.OnLocked(d.series, func() { locked = true })
			rep, err := d.series.RunPass(ctx)
			require.NoError(t, err)
			require.True(t, locked)
			assert.Equal(t, 95, rep.Assigned)
			for it, err := range st.List(ctx, "") {
				require.NoError(t, err)
				if strings.Contains(it.Key, "/_numbering/receipts/batch/") {
					chunks++
				}
			}
			assert.Zero(t, chunks, "chunks left after the batch finished")
			checkLedger(t, d, checkNumbered(t, d, ids))
		})
	}
}

func TestBadgerStore(t *testing.T) {
	ctx := context.Background()
	st, err := badgerstore.Open(t.TempDir(), &badgerstore.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	d := openDevice(t, "till", st, receiptOpts)
	numbering.Tune(d.series, 50, 120)
	var ids []string
	for i := range 300 {
		ids = append(ids, fmt.Sprintf("r-%03d", i))
		d.write(t, ids[i], i)
	}
	_, err = d.series.RunPass(ctx)
	require.NoError(t, err)
	checkLedger(t, d, checkNumbered(t, d, ids))
}

func TestRolledBackHead(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	d := openDevice(t, "till", st, receiptOpts)
	d.write(t, "a", 1)
	_, err := d.series.RunPass(ctx)
	require.NoError(t, err)
	const key = "v/" + vaultName + "/_numbering/receipts/head"
	old, err := st.Get(ctx, key)
	require.NoError(t, err)
	d.write(t, "b", 2)
	_, err = d.series.RunPass(ctx)
	require.NoError(t, err)

	// The store serves the older head, which would give number 2 again.
	_, err = st.Put(ctx, key, old.Value)
	require.NoError(t, err)
	d.write(t, "c", 3)
	_, err = d.series.RunPass(ctx)
	assert.ErrorIs(t, err, noydb.ErrRollback)
	_, err = d.series.Last(ctx)
	assert.ErrorIs(t, err, noydb.ErrRollback)
	a, ok, err := d.series.Lookup(ctx, "b")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, uint64(2), a.Number)
}
