package noydb_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// lateConflicts is a memstore whose every third transaction runs its
// function to the end and then rolls back with stores.ErrConflict, as an
// optimistic store does when another writer committed meanwhile: the
// ledger's batch then runs every closure again, and what a closure kept
// from its first run must not survive.
type lateConflicts struct {
	*memstore.Store
	n        atomic.Int64
	injected atomic.Int64
}

var errLate = errors.New("roll back: injected late conflict")

func (s *lateConflicts) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	err := s.Store.Update(ctx, func(tx stores.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if s.n.Add(1)%3 == 0 {
			s.injected.Add(1)
			return errLate
		}
		return nil
	})
	if errors.Is(err, errLate) {
		return stores.ErrConflict
	}
	return err
}

// The many-series load (numbers on many series, PutNumbered, records put
// and deleted) on a store whose batches conflict after their closures ran:
// every number exactly once, the ledger exactly the calls' entries, every
// audit clean.
func TestManySeriesRerunAfterLateConflict(t *testing.T) {
	st := &lateConflicts{Store: memstore.New()}
	runManySeries(t, st, manySeriesLoad{
		series: 8, perSeries: 300, nextCallers: 3,
		numbered: 2, numberedPer: 30,
		writers: 3, recordsPer: 20,
	})
	assert.Positive(t, st.injected.Load(), "late conflicts injected")
}
