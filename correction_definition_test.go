package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
)

// TestCorrectionOfASeriesWhoseDefinitionWasDeleted: the store deletes the
// stored definition of a series with periods after a number of it was
// taken; a correction of that number, in a process opened since, is a
// rollback (the ledger records the definition), not a refusal of the
// caller's reference: it used to fail with ErrInvalid ("series has no
// periods"), the corrected series read as one never defined. Nothing is
// taken.
func TestCorrectionOfASeriesWhoseDefinitionWasDeleted(t *testing.T) {
	ctx := context.Background()
	const defKey = "v/books/_sequences/inv\x01d\x00"
	for storeName, newAdv := range adversariesWithCAS() {
		t.Run(storeName, func(t *testing.T) {
			adv := newAdv(t)
			db, v := openSession(t, adv.Store(), "")
			inv, err := v.Sequence("inv", sequence.Options{Period: sequence.PeriodMonth})
			require.NoError(t, err)
			n, err := inv.NextAt(ctx, midday(2026, 1, 6))
			require.NoError(t, err)
			cn, err := v.Sequence("cn", sequence.Options{Corrects: "inv"})
			require.NoError(t, err)
			c, err := cn.Correcting(sequence.Ref{Period: "2026-01", N: n}).NextSerial(ctx)
			require.NoError(t, err, "a correction before the deletion")
			require.Equal(t, uint64(1), c.N)
			require.NoError(t, db.Close())
			require.NoError(t, adv.Drop(ctx, defKey))
			before, err := adv.Snapshot(ctx)
			require.NoError(t, err)

			_, v2 := openSession(t, adv.Store(), "")
			cn2, err := v2.Sequence("cn", sequence.Options{Corrects: "inv"})
			require.NoError(t, err)
			_, err = cn2.Correcting(sequence.Ref{Period: "2026-01", N: n}).NextSerial(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.NotErrorIs(t, err, sequence.ErrInvalid)
			after, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing taken")
		})
	}
}
