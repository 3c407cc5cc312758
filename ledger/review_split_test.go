package ledger_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A batch whose commit reports an error after the store applied it (the
// ambiguous outcome: a connection lost during COMMIT) must not be run
// again in halves: the halves append the same entries a second time, and
// their callers are told that their one append succeeded.
func TestReviewAmbiguousCommitIsNotSplit(t *testing.T) {
	var updates atomic.Int64
	st := faultstore.New(memstore.New(), faultstore.Options{
		After: func(op faultstore.Op, _ string) error {
			if op == faultstore.OpUpdate && updates.Add(1) == 2 {
				return faultstore.ErrInjectedAfter // the batch's commit: applied, reported failed
			}
			return nil
		},
	})
	l := newLedger(t, st)
	ctx := context.Background()
	release, held := holdQueue(t, l) // update 1

	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = l.Append(ctx, fact(i+1)) })
	}
	waitQueued(l, n)
	release()
	require.NoError(t, <-held)
	wg.Wait()

	seen := map[string]int{}
	for _, e := range readAll(t, l, 1) {
		seen[e.RequestID]++
	}
	for i := range n {
		id := fact(i + 1).RequestID
		assert.LessOrEqual(t, seen[id], 1, "append %d is in the ledger %d times", i+1, seen[id])
		if errs[i] == nil {
			assert.Equal(t, 1, seen[id], "append %d succeeded: its entry is in the ledger once", i+1)
		}
	}
	rep, err := l.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, rep.OK())
}
