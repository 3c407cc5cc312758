package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// reportsConflictOnce is an Update closure that reports stores.ErrConflict on its
// first run (it saw another writer's change, as a closure checking a
// version does) and appends on the next.
func reportsConflictOnce(l *ledger.Ledger, i int, runs *atomic.Int64) func(tx stores.Tx) error {
	return func(tx stores.Tx) error {
		if runs.Add(1) == 1 {
			return fmt.Errorf("record %d changed meanwhile: %w", i, stores.ErrConflict)
		}
		return writeFact(l, fmt.Sprintf("c%02d", i), i, nil)(tx)
	}
}

// Update retries a closure that reports a conflict, alone or in a batch:
// the outcome must not depend on whether other calls were waiting.
func TestConflictingClosureIsRetriedInABatch(t *testing.T) {
	ctx := context.Background()
	t.Run("alone", func(t *testing.T) {
		l := newLedger(t, memstore.New())
		var runs atomic.Int64
		require.NoError(t, l.Update(ctx, reportsConflictOnce(l, 1, &runs)))
		assert.Equal(t, int64(2), runs.Load(), "run again after its conflict")
	})
	t.Run("batched", func(t *testing.T) {
		l := newLedger(t, memstore.New())
		const n = 4
		runs := make([]atomic.Int64, n)
		errs := runTogether(t, l, n, nil, func(i int) error {
			return l.Update(ctx, reportsConflictOnce(l, i+1, &runs[i]))
		})
		for i := range n {
			assert.NoError(t, errs[i], "closure %d: a conflict is retried, as it is alone", i+1)
		}
		verifyClean(t, l, n)
	})
}
