package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// A series declared in a vault before its first number is listed (head 0,
// its definition), its declaration is a verified ledger entry, and a
// MustExist handle of a misspelt name takes and writes nothing.
func TestDeclaredSeriesIsListedAndGuardsTypos(t *testing.T) {
	ctx := context.Background()
	for name, open := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			v := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
			s, err := v.Sequence("invoices", sequence.Options{Format: "INV-{seq:04}", Period: sequence.PeriodYear})
			require.NoError(t, err)
			require.NoError(t, s.Declare(ctx))
			plain, err := v.Sequence("receipts", sequence.Options{})
			require.NoError(t, err)
			require.NoError(t, plain.Declare(ctx))

			got, err := v.Series(ctx)
			require.NoError(t, err)
			require.Len(t, got, 2)
			assert.Equal(t, "invoices", got[0].Name)
			assert.Zero(t, got[0].Head)
			assert.Equal(t, "INV-{seq:04}", got[0].Format)
			assert.Equal(t, sequence.PeriodYear, got[0].Definition.Period)
			assert.Equal(t, vault.SeriesInfo{Name: "receipts"}, got[1])
			named, err := v.SeriesNamed(ctx, "invoices")
			require.NoError(t, err)
			assert.Len(t, named, 1)

			head, err := v.Audit().Head(ctx)
			require.NoError(t, err)
			typo, err := v.Sequence("invoice", sequence.Options{MustExist: true})
			require.NoError(t, err)
			_, err = typo.Next(ctx)
			require.ErrorIs(t, err, sequence.ErrNoSuchSeries)
			after, err := v.Audit().Head(ctx)
			require.NoError(t, err)
			assert.Equal(t, head, after, "nothing recorded")

			// Numbering the declared series lists it once, by its counter.
			n, err := v.Sequence("invoices", sequence.Options{MustExist: true})
			require.NoError(t, err)
			serial, err := n.NextSerial(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), serial.N)
			got, err = v.Series(ctx)
			require.NoError(t, err)
			require.Len(t, got, 2)
			assert.Equal(t, uint64(1), got[0].Head)
			assert.NotEmpty(t, got[0].Period)

			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			defined := 0
			for e, err := range v.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				if e.Kind == ledger.SeriesDefined {
					defined++
				}
			}
			assert.Equal(t, 2, defined, "one series-defined entry per declaration")
			assert.NoError(t, rep.Problem)
			assert.Zero(t, rep.FirstBad)
		})
	}
}
