package ledger_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// appendBatches appends n facts, numbered from 1, in batches of 100.
func appendBatches(tb testing.TB, l *ledger.Ledger, n int) {
	tb.Helper()
	for i := 1; i <= n; i += 100 {
		var batch []ledger.Entry
		for j := i; j < i+100 && j <= n; j++ {
			batch = append(batch, fact(j))
		}
		_, err := l.Append(context.Background(), batch...)
		require.NoError(tb, err)
	}
}

// A store whose List yields keys outside the asked prefix gets an error
// wrapping stores.ErrMisbehaving from every read path, never a panic: the
// short walk, and the parallel walk of a long ledger, whose listing runs in
// a goroutine of its own where no caller could recover a panic.
func TestListOutsidePrefixIsMisbehaving(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		// The parallel walk needs more than one processor.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	walks := []struct {
		name    string
		entries int
	}{
		{"short", 10},
		{"parallel", 4*256 + 300}, // more than 4 chunks of stored entries
	}
	bad := []struct {
		name string
		key  string
	}{
		{"shorter than the prefix", "x"},
		{"another vault", "v/other/_ledger/00000000000000000001"},
		{"the head, outside the listed range", prefix + "_ledger/head"},
	}
	for _, kind := range storeKinds {
		for _, w := range walks {
			t.Run(kind.name+"/"+w.name, func(t *testing.T) {
				ctx := context.Background()
				inner := kind.make()
				t.Cleanup(func() { _ = inner.Close() })
				appendBatches(t, newLedger(t, inner), w.entries)
				for _, b := range bad {
					t.Run(b.name, func(t *testing.T) {
						adv := faultstore.NewAdversary(inner)
						l := newLedger(t, adv.Store())
						verifyClean(t, l, uint64(w.entries))
						adv.InjectList(prefix+"_ledger/", stores.Item{Key: b.key, Value: []byte("x"), Version: 1})

						rep, err := l.Verify(ctx)
						assert.ErrorIs(t, err, stores.ErrMisbehaving, "Verify")
						assert.False(t, rep.OK() && err == nil)

						got, err := readErr(l, 0)
						assert.ErrorIs(t, err, stores.ErrMisbehaving, "Read")
						assert.Empty(t, got, "nothing is trusted from that listing")
					})
				}
				// The store itself was never changed: the ledger verifies.
				verifyClean(t, newLedger(t, inner), uint64(w.entries))
			})
		}
	}
}
