package numbering_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// cheapKDF keeps tests fast; production vaults use crypto.DefaultKDF.
var cheapKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

const (
	vaultName = "shop"
	secret    = "shop-secret-2026"
	format    = "R-{seq:05}"
)

// Receipt is the record type the tests number.
type Receipt struct {
	Number string
	Device string
	Total  int
}

var receiptOpts = numbering.Options{Collection: "receipts", Field: "Number", Format: format}

// device is one DB instance with its vault, collection and series handle.
type device struct {
	name     string
	db       *noydb.DB
	v        *vault.Vault
	receipts *vault.Collection[Receipt]
	series   *numbering.Series
}

func openDevice(tb testing.TB, name string, st stores.Store, opts numbering.Options) *device {
	tb.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{
		User: "shop", Secret: []byte(secret), Store: st,
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = db.Close() })
	v, err := db.OpenVault(context.Background(), vaultName)
	require.NoError(tb, err)
	//lint:ignore SA1019 these tests cover the deprecated JSON-field API too
	series, err := v.Numbering("receipts", opts)
	require.NoError(tb, err)
	return &device{name: name, db: db, v: v, receipts: vault.CollectionOf[Receipt](v, "receipts"), series: series}
}

// openFileStore opens a file store on dir, closed at the end of the test.
// NoSync: a killed process loses nothing the kernel has, which is what the
// tests kill.
func openFileStore(tb testing.TB, dir string) *filestore.Store {
	tb.Helper()
	st, err := filestore.Open(dir, &filestore.Options{NoSync: true})
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// write puts a receipt and enqueues it, returning its provisional id.
func (d *device) write(tb testing.TB, id string, total int) string {
	tb.Helper()
	ctx := context.Background()
	require.NoError(tb, d.receipts.Put(ctx, id, Receipt{Device: d.name, Total: total}))
	p, err := d.series.Enqueue(ctx, id)
	require.NoError(tb, err)
	return p
}

// writeMany puts and enqueues the receipts ids, a hundred at a time: puts
// then enqueues, each from several goroutines (so that ledger appends
// combine).
func (d *device) writeMany(ids []string) error {
	ctx := context.Background()
	for len(ids) > 0 {
		part := ids[:min(100, len(ids))]
		ids = ids[len(part):]
		err := each(len(part), func(i int) error {
			return d.receipts.Put(ctx, part[i], Receipt{Device: d.name, Total: i})
		})
		if err == nil {
			err = each(len(part), func(i int) error {
				_, err := d.series.Enqueue(ctx, part[i])
				return err
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// each runs fn for 0 … n-1 on eight goroutines and returns the first error.
func each(n int, fn func(i int) error) error {
	const workers = 8
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			var err error
			for i := w; i < n && err == nil; i += workers {
				err = fn(i)
			}
			errs <- err
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// checkNumbered checks the promises of deferred numbering for the records
// ids (all enqueued, none deleted) and returns their assignments by id:
//   - each record has exactly one number, the numbers are exactly 1..len(ids);
//   - each record's field holds its formatted number;
//   - within each batch, numbers follow provisional order (then record id);
//   - nothing is pending, and the series' head is at len(ids).
func checkNumbered(tb testing.TB, d *device, ids []string) map[string]numbering.Assignment {
	tb.Helper()
	ctx := context.Background()
	got := map[string]numbering.Assignment{}
	for a, err := range d.series.Assignments(ctx) {
		require.NoError(tb, err)
		_, dup := got[a.RecordID]
		require.False(tb, dup, "record %s listed twice", a.RecordID)
		got[a.RecordID] = a
	}
	require.Len(tb, got, len(ids), "assignments")
	numbers := make([]uint64, 0, len(ids))
	for _, id := range ids {
		a, ok := got[id]
		require.True(tb, ok, "record %s has no number", id)
		assert.False(tb, a.Voided, "record %s voided", id)
		numbers = append(numbers, a.Number)
	}
	requireExactly(tb, numbers, len(ids))

	byBatch := map[uint64][]numbering.Assignment{}
	for _, a := range got {
		byBatch[a.Batch] = append(byBatch[a.Batch], a)
	}
	for b, as := range byBatch {
		sort.Slice(as, func(i, j int) bool { return as[i].Number < as[j].Number })
		for i := 1; i < len(as); i++ {
			p, q := as[i-1], as[i]
			ordered := p.Provisional < q.Provisional || (p.Provisional == q.Provisional && p.RecordID < q.RecordID)
			require.True(tb, ordered, "batch %d: %s (#%d, %s) before %s (#%d, %s)", b,
				p.RecordID, p.Number, p.Provisional, q.RecordID, q.Number, q.Provisional)
		}
	}

	n := 0
	for r, err := range d.receipts.List(ctx) {
		require.NoError(tb, err)
		a, ok := got[r.ID]
		require.True(tb, ok, "record %s not numbered", r.ID)
		require.Equal(tb, fmt.Sprintf("R-%05d", a.Number), r.Value.Number, "record %s", r.ID)
		require.Equal(tb, a.Formatted, r.Value.Number, "record %s", r.ID)
		n++
	}
	require.Equal(tb, len(ids), n, "records")

	pending, err := d.series.Pending(ctx)
	require.NoError(tb, err)
	require.Zero(tb, pending, "pending entries left")
	last, err := d.series.Last(ctx)
	require.NoError(tb, err)
	require.Equal(tb, uint64(len(ids)), last, "head")
	return got
}

// checkLedger checks that the ledger verifies and has exactly one
// NumberAssigned entry per number 1..n of the series, naming the record
// that number went to, and no NumberVoided entry.
func checkLedger(tb testing.TB, d *device, got map[string]numbering.Assignment) {
	tb.Helper()
	ctx := context.Background()
	rep, err := d.v.Audit().Verify(ctx)
	require.NoError(tb, err)
	require.True(tb, rep.OK())
	byNumber := map[uint64]string{}
	for id, a := range got {
		byNumber[a.Number] = id
	}
	seen := map[uint64]int{}
	for e, err := range d.v.Audit().Read(ctx, 1) {
		require.NoError(tb, err)
		switch e.Kind {
		case ledger.NumberAssigned:
			require.Equal(tb, "receipts", e.Series)
			require.Equal(tb, byNumber[e.Number], e.ID, "number %d", e.Number)
			require.Equal(tb, "receipts", e.Collection)
			require.NotZero(tb, e.Revision)
			require.Len(tb, e.CipherHash, 32)
			seen[e.Number]++
		case ledger.NumberVoided:
			tb.Fatalf("unexpected void of %d", e.Number)
		}
	}
	require.Len(tb, seen, len(got), "numbers in the ledger")
	for n, c := range seen {
		require.Equal(tb, 1, c, "ledger entries for number %d", n)
	}
}

// requireExactly checks that got holds each of 1..n exactly once.
func requireExactly(tb testing.TB, got []uint64, n int) {
	tb.Helper()
	s := slices.Clone(got)
	slices.Sort(s)
	var bad []string
	for i, v := range s {
		if v != uint64(i+1) {
			bad = append(bad, "at "+strconv.Itoa(i)+": "+strconv.FormatUint(v, 10))
			if len(bad) > 10 {
				break
			}
		}
	}
	require.Empty(tb, bad, "want each of 1..%d exactly once (got %d values)", n, len(got))
	require.Len(tb, s, n)
}

// snapshot returns every key and value of a store.
func snapshot(tb testing.TB, st stores.Store) map[string]string {
	tb.Helper()
	m := map[string]string{}
	for it, err := range st.List(context.Background(), "") {
		require.NoError(tb, err)
		m[it.Key] = string(it.Value)
	}
	return m
}

// passCutter stops a pass after its k-th store operation: its hook goes
// in faultstore.Options.Before (alone, or called from another hook), and
// pass runs one pass cut so.
type passCutter struct {
	ops, limit atomic.Int64
	cancel     atomic.Pointer[context.CancelFunc]
}

// hook counts a store operation and cancels the pass at the k-th.
func (c *passCutter) hook(faultstore.Op, string) error {
	if c.ops.Add(1) == c.limit.Load() {
		if cancel := c.cancel.Load(); cancel != nil {
			(*cancel)()
		}
	}
	return nil
}

// pass runs a pass of s whose context ends at its k-th store operation.
func (c *passCutter) pass(ctx context.Context, s *numbering.Series, k int64) (numbering.PassReport, error) {
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	c.cancel.Store(&stop)
	defer c.cancel.Store(nil)
	c.ops.Store(0)
	c.limit.Store(k)
	return s.RunPass(pctx)
}
