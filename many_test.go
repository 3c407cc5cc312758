package noydb_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// No caller may fail for being one of many.

// together runs n goroutines that each call fn once, released at the same
// moment so that they queue up together, and returns the results, failing
// the test on any error (reporting the first few).
func together[R any](t *testing.T, n int, fn func(ctx context.Context, i int) (R, error)) []R {
	t.Helper()
	ctx := context.Background()
	out := make([]R, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = fn(ctx, i)
		})
	}
	close(start)
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			if failed < 5 {
				t.Errorf("caller %d: %v", i, err)
			}
			failed++
		}
	}
	require.Zero(t, failed, "callers failed, of %d", n)
	return out
}

// 15,000 goroutines calling Next once on one series, each number with its
// ledger entry: no error, exactly 1..15,000, and the ledger verifies.
func TestManyCallersOneSeries(t *testing.T) {
	const callers = 15000
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := openVault(t, openDB(t, newStore(t), "firm", "s"), "books")
			seq, err := v.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			got := together(t, callers, func(ctx context.Context, _ int) (uint64, error) { return seq.Next(ctx) })
			requireDense(t, got)
			require.Len(t, got, callers)
			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(callers), rep.Entries)
		})
	}
}

// Claims with the longest request ids on a series with the longest name
// and a long partition: the ledger entries of a combined batch are at their
// largest, and still no caller fails.
func TestManyLongClaimsOneSeries(t *testing.T) {
	const callers = 3000
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "firm", "s"), "books")
	series := strings.Repeat("s", sequence.MaxSeriesLen)
	part := []any{strings.Repeat("p", 200), strings.Repeat("q", 200)}
	seq, err := v.Sequence(series, sequence.Options{Partition: part})
	require.NoError(t, err)
	got := together(t, callers, func(ctx context.Context, i int) (uint64, error) {
		id := fmt.Sprintf("%0*d", sequence.MaxRequestIDLen, i)
		return seq.Claim(ctx, id)
	})
	requireDense(t, got)
	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(callers), rep.Entries)
}

// Many PutNumbered of large records at once on badger on disk: together
// they are more than one badger transaction can carry (badger refuses it
// as too big), yet each caller's record is written with its number.
func TestManyLargePutNumbered(t *testing.T) {
	const callers = 24
	ctx := context.Background()
	st, err := badgerstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	v := openVault(t, openDB(t, st, "firm", "s"), "books")
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	// Under badger's value threshold (1 MiB), so the records count in full
	// against its transaction limit.
	notes := strings.Repeat("n", 900_000)
	got := together(t, callers, func(ctx context.Context, i int) (uint64, error) {
		var n uint64
		_, err := invoices.PutNumbered(ctx, fmt.Sprint("inv-", i), seq, func(s sequence.Serial) (Invoice, error) {
			n = s.N
			return Invoice{Number: s.Formatted, Notes: notes}, nil
		})
		return n, err
	})
	requireDense(t, got)
	for i, n := range got {
		inv, err := invoices.Get(ctx, fmt.Sprint("inv-", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(n), inv.Number)
	}
	rep, err := seq.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, callers, rep.Bound)
}
