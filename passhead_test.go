package noydb_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores/memstore"
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

// Case 1 on a hub: devices hand receipts off and a pass numbers them on the
// hub; the hub then puts back its pass state as it was before the pass,
// keeping its ledger and the stamped records. The next pass, from a new
// device with a state folder of its own, refuses with ErrRollback and
// gives no number, writing nothing on the hub. PostgreSQL needs
// scripts/with-postgres.
func TestPassHeadBehindLedgerIsRollbackOnAHub(t *testing.T) {
	const hubState = "v/shop/_numbering/ticket/"
	for name, open := range oneSeriesStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := faultstore.NewAdversary(open(t))
			hub := adv.Store()
			dev := memstore.New()
			d := openOnHub(t, dev, hub, deviceOpts{stateDir: t.TempDir()})
			_, dh := stubsOf(t, d)
			for _, id := range []string{"a", "b"} {
				r, err := dh.Put(ctx, id, Stub{Total: 1})
				require.NoError(t, err)
				require.True(t, r.Pending)
			}
			copyRecords(t, dev, adv.Raw(), "tickets", false)
			before, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			rep, err := dh.Settle(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(2), rep.Last)
			require.NoError(t, d.Close())

			require.NoError(t, adv.Restore(ctx, before, hubState))

			dev2 := memstore.New()
			d2 := openOnHub(t, dev2, hub, deviceOpts{stateDir: t.TempDir()})
			_, dh2 := stubsOf(t, d2)
			r, err := dh2.Put(ctx, "c", Stub{Total: 3})
			require.NoError(t, err)
			require.True(t, r.Pending)
			copyRecords(t, dev2, adv.Raw(), "tickets", false)
			frozen, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, err = dh2.Settle(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			after, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			for k := range after {
				if strings.HasPrefix(k, hubState+"pending/") {
					delete(after, k) // c's entry, which Settle hands the hub before the pass
				}
			}
			assert.Equal(t, snapUnder(frozen, hubState), snapUnder(after, hubState), "the refused pass wrote no pass state on the hub")
			assert.Equal(t, frozen["v/shop/tickets/c"], after["v/shop/tickets/c"], "c was not stamped")
		})
	}
}

// snapUnder is the part of snap under prefix.
func snapUnder(snap faultstore.Snapshot, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range snap {
		if strings.HasPrefix(k, prefix) {
			out[k] = string(v)
		}
	}
	return out
}
