package numbering_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestStatusWhileAPassFinishesTheBatch: Status reads the head, finds a
// batch in flight, and before it reads the batch's chunks a pass elsewhere
// finishes that batch and clears its chunks. Status takes no lock and may
// run next to a pass, so this is no corruption: it reads again and reports
// where the series stands now.
func TestStatusWhileAPassFinishesTheBatch(t *testing.T) {
	ctx := context.Background()
	var (
		cut    passCutter
		armed  atomic.Bool
		other  atomic.Pointer[device]
		passed atomic.Int64
	)
	hook := func(op faultstore.Op, key string) error {
		_ = cut.hook(op, key)
		if strings.Contains(key, "/batch/") && armed.CompareAndSwap(true, false) {
			// The pass of another device runs to the end here, between
			// Status's read of the head and of the chunks.
			_, err := other.Load().series.RunPass(ctx)
			if err != nil {
				return fmt.Errorf("the concurrent pass: %w", err)
			}
			passed.Add(1)
		}
		return nil
	}
	st := faultstore.New(memstore.New(), faultstore.Options{Before: hook})
	d := openDevice(t, "till", st, receiptOpts)
	other.Store(openDevice(t, "back", st, receiptOpts))
	numbering.Tune(d.series, 2, 2)
	for i := range 6 {
		d.write(t, fmt.Sprintf("r-%d", i), i)
	}
	// Interrupt passes earlier and earlier until one leaves a batch in flight.
	inFlight := false
	for k := int64(1); k < 200 && !inFlight; k++ {
		_, err := cut.pass(ctx, d.series, k)
		require.ErrorIs(t, err, context.Canceled)
		s, err := d.series.Status(ctx)
		require.NoError(t, err)
		inFlight = s.Batch != nil
	}
	require.True(t, inFlight, "no interrupted pass left a batch in flight")

	armed.Store(true)
	s, err := d.series.Status(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, passed.Load(), "the concurrent pass ran inside Status")
	assert.Equal(t, numbering.Status{Last: 6}, s)
}

// TestStatusOfLostChunks: a head that names a batch whose chunks are gone
// (and stays so when read again) is corruption, not a pass running.
func TestStatusOfLostChunks(t *testing.T) {
	ctx := context.Background()
	var cut passCutter
	hook := cut.hook
	st := faultstore.New(memstore.New(), faultstore.Options{Before: hook})
	d := openDevice(t, "till", st, receiptOpts)
	numbering.Tune(d.series, 2, 2)
	for i := range 6 {
		d.write(t, fmt.Sprintf("r-%d", i), i)
	}
	inFlight := false
	for k := int64(1); k < 200 && !inFlight; k++ {
		_, err := cut.pass(ctx, d.series, k)
		require.ErrorIs(t, err, context.Canceled)
		s, err := d.series.Status(ctx)
		require.NoError(t, err)
		inFlight = s.Batch != nil
	}
	require.True(t, inFlight, "no interrupted pass left a batch in flight")
	var chunks []string
	for it, err := range st.List(ctx, "v/") {
		require.NoError(t, err)
		if strings.Contains(it.Key, "/batch/") {
			chunks = append(chunks, it.Key)
		}
	}
	require.NotEmpty(t, chunks)
	for _, k := range chunks {
		require.NoError(t, st.Delete(ctx, k))
	}
	_, err := d.series.Status(ctx)
	assert.ErrorIs(t, err, numbering.ErrCorrupt)
}
