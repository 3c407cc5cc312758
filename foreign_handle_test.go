package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/vault"
)

// Two DBs open the same vault: each has its own handle, and a sequence of
// one handle given to the other's transaction or PutNumbered is a caller's
// mistake, refused with ErrInvalidArgument before anything is written, not
// a tamper alarm from the other handle's ledger.
func TestSequenceOfAnotherHandleRefused(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v1 := openVault(t, openDB(t, st, "firm", "s"), "books")
			v2 := openVault(t, openDB(t, st, "firm", "s"), "books")
			seq2 := mustSeq(t, v2, "inv")
			invoices1 := vault.CollectionOf[Invoice](v1, "invoices")
			before := snapshot(t, st)

			err := v1.Update(ctx, func(tx *vault.Tx) error { _, err := tx.Next(seq2); return err })
			assert.ErrorIs(t, err, vault.ErrInvalidArgument)
			assert.NotErrorIs(t, err, noydb.ErrTampered)
			_, err = invoices1.PutNumbered(ctx, "a", seq2, numberInvoice)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument)
			assert.NotErrorIs(t, err, noydb.ErrTampered)
			assert.Equal(t, before, snapshot(t, st), "nothing written")

			// Each handle's own sequence works, and they share the counter.
			_, err = invoices1.PutNumbered(ctx, "a", mustSeq(t, v1, "inv"), numberInvoice)
			require.NoError(t, err)
			var n uint64
			require.NoError(t, v2.Update(ctx, func(tx *vault.Tx) error { s, err := tx.Next(seq2); n = s.N; return err }))
			assert.Equal(t, uint64(2), n)
		})
	}
}
