package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// The auditor's question: for every number 1..head, which record has it,
// which were voided, and which were taken but never used.
func TestSequenceAudit(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "firm", "s"), "books")
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	seq, err := v.Sequence("fatture", sequence.Options{Partition: []any{2026}, Format: "{partition.0}/{seq:04}"})
	require.NoError(t, err)
	other, err := v.Sequence("fatture", sequence.Options{Partition: []any{2027}})
	require.NoError(t, err)

	for i := 1; i <= 3; i++ { // 1..3 bound
		_, err := invoices.PutNumbered(ctx, fmt.Sprint("inv-", i), seq, func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted}, nil
		})
		require.NoError(t, err)
	}
	_, err = seq.Next(ctx) // 4 taken and never used
	require.NoError(t, err)
	_, err = seq.Next(ctx) // 5 taken, then voided
	require.NoError(t, err)
	require.NoError(t, seq.Void(ctx, 5, "customer cancelled"))
	require.NoError(t, seq.SeedTo(ctx, 8)) // 6..8 imported
	_, err = invoices.PutNumbered(ctx, "inv-9", seq, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil
	})
	require.NoError(t, err)
	_, err = other.Next(ctx) // another partition: not part of this audit
	require.NoError(t, err)

	rep, err := seq.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(9), rep.Head)
	want := []sequence.NumberState{
		sequence.StateBound, sequence.StateBound, sequence.StateBound,
		sequence.StateUnbound, sequence.StateVoided,
		sequence.StateSeeded, sequence.StateSeeded, sequence.StateSeeded,
		sequence.StateBound,
	}
	numbers := slices.Collect(rep.Numbers())
	require.Len(t, numbers, len(want))
	for i, a := range numbers {
		assert.Equal(t, uint64(i+1), a.N)
		assert.Equal(t, want[i], a.State, "number %d", a.N)
	}
	assert.Equal(t, "inv-2", numbers[1].ID)
	assert.Equal(t, "invoices", numbers[1].Collection)
	assert.Equal(t, "customer cancelled", numbers[4].Reason)
	assert.Equal(t, []sequence.Run{
		{From: 1, To: 1, State: sequence.StateBound, Collection: "invoices", ID: "inv-1"},
		{From: 2, To: 2, State: sequence.StateBound, Collection: "invoices", ID: "inv-2"},
		{From: 3, To: 3, State: sequence.StateBound, Collection: "invoices", ID: "inv-3"},
		{From: 4, To: 4, State: sequence.StateUnbound},
		{From: 5, To: 5, State: sequence.StateVoided, Reason: "customer cancelled"},
		{From: 6, To: 8, State: sequence.StateSeeded},
		{From: 9, To: 9, State: sequence.StateBound, Collection: "invoices", ID: "inv-9"},
	}, rep.Runs)
	assert.Equal(t, 4, rep.Bound)
	assert.Equal(t, 1, rep.Unbound)
	assert.Equal(t, 1, rep.Voided)
	assert.Equal(t, 3, rep.Seeded)
	assert.Zero(t, rep.Missing)

	// A bound number whose record goes away is flagged, not lost.
	require.NoError(t, invoices.Delete(ctx, "inv-1"))
	require.NoError(t, invoices.Delete(ctx, "inv-2")) // a record keeps its number until deleted
	_, err = invoices.PutNumbered(ctx, "inv-2", seq, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil // inv-2 now carries 10, not 2
	})
	require.NoError(t, err)
	rep, err = seq.Audit(ctx)
	require.NoError(t, err)
	numbers = slices.Collect(rep.Numbers())
	require.Len(t, numbers, 10)
	assert.True(t, numbers[0].Orphaned, "1: its record was deleted")
	assert.True(t, numbers[1].Orphaned, "2: its record now carries 10")
	assert.False(t, numbers[2].Orphaned)
	assert.False(t, numbers[9].Orphaned)
	assert.Equal(t, 2, rep.Orphaned)

	// Voiding a number never issued, or twice, is refused.
	assert.Error(t, seq.Void(ctx, 11, "nope"))
	assert.Error(t, seq.Void(ctx, 5, "again"))
}

// A failing build takes no number and writes nothing: the next record gets
// the number the failed one would have had.
func TestPutNumberedFailureTakesNoNumber(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openVault(t, openDB(t, st, "firm", "s"), "books")
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = invoices.PutNumbered(ctx, "a", seq, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil
	})
	require.NoError(t, err)
	before := snapshot(t, st)

	boom := errors.New("customer record incomplete")
	_, err = invoices.PutNumbered(ctx, "b", seq, func(sequence.Serial) (Invoice, error) { return Invoice{}, boom })
	require.ErrorIs(t, err, boom)
	assert.Equal(t, before, snapshot(t, st), "a failed PutNumbered writes nothing")

	inv, err := invoices.PutNumbered(ctx, "c", seq, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "2", inv.Number)
}

// PutNumbered needs a store that can commit a number and a record together.
func TestPutNumberedRefusedOnFilestore(t *testing.T) {
	ctx := context.Background()
	st, err := filestore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	v := openVault(t, openDB(t, st, "firm", "s"), "books")
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = vault.CollectionOf[Invoice](v, "invoices").PutNumbered(ctx, "a", seq, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil
	})
	assert.ErrorIs(t, err, sequence.ErrOffline)
	_, err = seq.Next(ctx)
	assert.ErrorIs(t, err, sequence.ErrOffline)
}
