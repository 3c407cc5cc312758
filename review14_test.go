package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// refusedEverywhere checks that every allocation path refuses a number
// dated into q's period of date with ErrRollback.
func refusedEverywhere(t *testing.T, v *vault.Vault, q *sequence.Sequence, date time.Time) {
	t.Helper()
	ctx := context.Background()
	n, err := q.NextAt(ctx, date)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, noydb.ErrRollback, "NextAt")
	_, err = q.At(date).Claim(ctx, "order-1")
	assert.ErrorIs(t, err, noydb.ErrRollback, "Claim")
	_, err = q.At(date).NextN(ctx, 2)
	assert.ErrorIs(t, err, noydb.ErrRollback, "NextN")
	_, err = vault.CollectionOf[Invoice](v, "invoices").PutNumbered(ctx, "late", q.At(date),
		func(s sequence.Serial) (Invoice, error) { return Invoice{Number: s.Formatted}, nil })
	assert.ErrorIs(t, err, noydb.ErrRollback, "PutNumbered")
	err = v.Update(ctx, func(tx *vault.Tx) error {
		_, err := tx.Next(q.At(date))
		return err
	})
	assert.ErrorIs(t, err, noydb.ErrRollback, "tx.Next")
}

// A closed period's counter replayed by the store to before the close (or
// deleted, for a period closed without numbers) is a rollback: the ledger
// records the close, so the period does not silently reopen, in this
// session or a later one.
func TestClosedPeriodReplayedIsRollback(t *testing.T) {
	ctx := context.Background()
	const key = "v/books/_sequences/inv\x002025"
	for storeName, newAdv := range adversaries() {
		for _, c := range []struct {
			name    string
			numbers int
			undo    func(t *testing.T, adv *faultstore.Adversary, snap faultstore.Snapshot)
		}{
			{"replayed", 3, func(t *testing.T, adv *faultstore.Adversary, snap faultstore.Snapshot) {
				require.NoError(t, adv.Restore(ctx, snap, key))
			}},
			{"deleted", 0, func(t *testing.T, adv *faultstore.Adversary, _ faultstore.Snapshot) {
				require.NoError(t, adv.Drop(ctx, key))
			}},
		} {
			t.Run(storeName+"/"+c.name, func(t *testing.T) {
				adv := newAdv(t)
				db, v := openSession(t, adv.Store(), "")
				opts := sequence.Options{Period: sequence.PeriodYear}
				q, err := v.Sequence("inv", opts)
				require.NoError(t, err)
				for range c.numbers {
					_, err := q.NextAt(ctx, midday(2025, 6, 1))
					require.NoError(t, err)
				}
				_, err = q.NextAt(ctx, midday(2026, 1, 5)) // the series is defined
				require.NoError(t, err)
				snap, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				require.NoError(t, q.ClosePeriod(ctx, "2025"))
				c.undo(t, adv, snap)

				// The same session.
				refusedEverywhere(t, v, q, midday(2025, 7, 1))
				require.NoError(t, db.Close())

				// A later session.
				_, v2 := openSession(t, adv.Store(), "")
				q2, err := v2.Sequence("inv", opts)
				require.NoError(t, err)
				refusedEverywhere(t, v2, q2, midday(2025, 7, 1))
				// Nor through tx.Next first, in a third session.
				_, v3 := openSession(t, adv.Store(), "")
				q3, err := v3.Sequence("inv", opts)
				require.NoError(t, err)
				err = v3.Update(ctx, func(tx *vault.Tx) error {
					_, err := tx.Next(q3.At(midday(2025, 7, 1)))
					return err
				})
				assert.ErrorIs(t, err, noydb.ErrRollback, "tx.Next first")
				// Another period is not affected.
				n, err := q2.NextAt(ctx, midday(2026, 1, 6))
				require.NoError(t, err)
				assert.Equal(t, uint64(2), n)
			})
		}
	}
}
