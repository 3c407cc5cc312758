package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// A handle without the record's date cannot render date tokens but with
// the date of the call, which a later Get would render again otherwise:
// NumberingOf refuses a format that has them, and a series whose stored
// format has them (a Sequence's) fails Put, Get and Settle with
// ErrDefinitionMismatch, its stored numbers unchanged. (Before, Get showed
// a receipt numbered R2020-001 as R<this year>-001.)
func TestNumberingOfRefusesDateTokensWithoutTheRecordsDate(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, memstore.New(), "")
	tills := vault.CollectionOf[Till](v, "tills")
	_, err := vault.NumberingOf(tills, "tills", sequence.Options{Format: "R{YYYY}-{seq:03}"}, setTill)
	require.ErrorIs(t, err, vault.ErrInvalidArgument)
	assert.ErrorContains(t, err, "NumberingOfDated")

	q, err := v.Sequence("tills", sequence.Options{Format: "R{YYYY}-{seq:03}"})
	require.NoError(t, err)
	old := time.Date(2020, time.March, 3, 12, 0, 0, 0, time.UTC)
	_, err = tills.PutNumbered(ctx, "a", q.At(old), func(s sequence.Serial) (Till, error) {
		return Till{No: s.Formatted, Date: old}, nil
	})
	require.NoError(t, err)

	h, err := vault.NumberingOf(tills, "tills", sequence.Options{}, setTill)
	require.NoError(t, err, "no I/O: the stored format is read by the first call")
	_, err = h.Get(ctx, "a")
	assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
	_, err = h.Put(ctx, "b", Till{})
	assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
	_, err = h.Settle(ctx)
	assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
	_, err = tills.Get(ctx, "b")
	assert.ErrorIs(t, err, vault.ErrNotFound, "nothing written")
	got, err := tills.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "R2020-001", got.No)

	// The dated handle renders it with the record's own date.
	d, err := vault.NumberingOfDated(tills, "tills", sequence.Options{}, setTill, tillDate)
	require.NoError(t, err)
	g, err := d.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "R2020-001", g.Value.No)
}
