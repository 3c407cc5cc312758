package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/vault"
)

// passStateOf is the prefix of the pass state of the test series "ticket"
// (stubsOf) in the vault "books".
const passStateOf = "v/books/_numbering/ticket/"

// handOff writes records ids through the collection and puts them in line
// for the series' next pass (Enqueue: the pass path on every store).
func handOff(t testing.TB, c *vault.Collection[Stub], h *vault.Numbered[Stub], ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		require.NoError(t, c.Put(ctx, id, Stub{Total: len(id)}))
		_, err := h.Series().Enqueue(ctx, id)
		require.NoError(t, err)
	}
}

// A store puts the pass state of a series back as it was before a pass,
// keeping the ledger, which records the numbers the pass gave, and the
// records it stamped. The next pass, on a new device with a state folder
// of its own (no pin of that head), refuses with ErrRollback, giving no
// number and writing nothing; Last and the series' Audit say so too.
// (Before, the pass skipped the two stamped records and gave number 1
// again to a third, which only a later Audit reported.)
func TestPassHeadBehindLedgerIsRollback(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			db, v := openSession(t, adv.Store(), t.TempDir())
			c, h := stubsOf(t, v)
			handOff(t, c, h, "a", "b")
			before, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			rep, err := h.Settle(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(2), rep.Last)
			require.NoError(t, db.Close())

			require.NoError(t, adv.Restore(ctx, before, passStateOf))

			_, v2 := openSession(t, adv.Store(), t.TempDir()) // a new device
			c2, h2 := stubsOf(t, v2)
			handOff(t, c2, h2, "c")
			frozen, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, err = h2.Settle(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.ErrorIs(t, err, numbering.ErrRollback)
			after, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			assert.Equal(t, frozen, after, "a refused pass writes nothing")
			_, err = h2.Series().Last(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			_, err = h2.Series().Audit(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			got, err := h2.Get(ctx, "c")
			require.NoError(t, err)
			assert.Zero(t, got.Serial.N, "c has no number")
		})
	}
}

// The same with the series' counter and the ledger rolled back as well (a
// new device has no pin of them): the records the pass stamped still carry
// their numbers, and the next pass, which reads them, refuses with
// ErrRollback rather than give those numbers again.
func TestPassHeadBehindStampedRecordsIsRollback(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			db, v := openSession(t, adv.Store(), t.TempDir())
			c, h := stubsOf(t, v)
			handOff(t, c, h, "a", "b")
			before, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, err = h.Settle(ctx)
			require.NoError(t, err)
			require.NoError(t, db.Close())

			require.NoError(t, adv.Restore(ctx, before, passStateOf))
			require.NoError(t, adv.Restore(ctx, before, "v/books/_ledger/"))
			require.NoError(t, adv.Restore(ctx, before, "v/books/_sequences/"))

			_, v2 := openSession(t, adv.Store(), t.TempDir())
			c2, h2 := stubsOf(t, v2)
			handOff(t, c2, h2, "c")
			frozen, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, err = h2.Settle(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			after, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			assert.Equal(t, frozen, after, "a refused pass writes nothing")
		})
	}
}
