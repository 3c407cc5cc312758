package noydb_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestReview18JoinCutShortAfterClosedPeriod: a join that seeded and closed
// a period on the hub, then lost the hub before it wrote the header, joins
// at the next call: the seed of the closed period again is no error.
func TestReview18JoinCutShortAfterClosedPeriod(t *testing.T) {
	ctx := context.Background()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	opts := sequence.Options{Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location: rome, Format: "FY{FY}/{seq:04}"}
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 12, 0, 0, 0, rome) }

	dev := memstore.New()
	solo := openStandalone(t, dev)
	q, err := solo.Sequence("invoices", opts)
	require.NoError(t, err)
	for range 2 {
		_, err := q.NextAt(ctx, day(2026, 3, 1))
		require.NoError(t, err)
	}
	_, err = q.NextAt(ctx, day(2026, 5, 1))
	require.NoError(t, err)
	require.NoError(t, q.ClosePeriod(ctx, "FY2025-26"))
	require.NoError(t, solo.Close())

	var failHeader atomic.Bool
	failHeader.Store(true)
	hub := faultstore.New(memstore.New(), faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && strings.HasSuffix(key, "_header") && failHeader.CompareAndSwap(true, false) {
			return fmt.Errorf("connection reset: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	v := openOnHub(t, dev, hub, deviceOpts{})
	require.False(t, failHeader.Load(), "the header write was cut short")
	qa, err := v.Sequence("invoices", opts)
	require.NoError(t, err)
	n, err := qa.NextAt(ctx, day(2026, 5, 2))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
}
