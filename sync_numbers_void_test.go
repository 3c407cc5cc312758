package noydb_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

var errStampCut = errors.New("cut before the stamp")

// TestSyncPendingReceiptBackAfterItsNumberWasVoided: a pass on the hub
// records a batch holding pending receipt r and stops before stamping it
// (a kill). Device A deletes r and pushes the deletion; the next pass
// finishes the batch and voids r's number, 1. Device B, which held r
// pending under the same provisional id, edited it offline, and its sync
// brings r back to the hub (its edit wins over the deletion), pending
// under that provisional id again. That is no rollback: reading r works on
// B and on the hub, and the next pass numbers it, 2; with the voided 1
// the numbers are 1..2, each once, and no handoff entry is left.
func TestSyncPendingReceiptBackAfterItsNumberWasVoided(t *testing.T) {
	ctx := context.Background()
	rawHub, da, db := memstore.New(), memstore.New(), memstore.New()
	var armed atomic.Bool
	var updates atomic.Int64
	hubA := faultstore.New(rawHub, faultstore.Options{Before: func(op faultstore.Op, _ string) error {
		// The pass's second transaction stamps the batch: the first
		// recorded it.
		if armed.Load() && op == faultstore.OpUpdate && updates.Add(1) == 2 {
			return errStampCut
		}
		return nil
	}})
	a, b := syncDevice(t, da, hubA), syncDevice(t, db, rawHub)
	ra, err := vault.NumberingOf(vault.CollectionOf[Receipt](a, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	rb, err := vault.NumberingOf(vault.CollectionOf[Receipt](b, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)

	r, err := ra.Put(ctx, "r", Receipt{Total: 1})
	require.NoError(t, err)
	require.True(t, r.Pending)
	mustSync(t, a)
	mustSync(t, b)
	armed.Store(true)
	_, err = ra.Settle(ctx)
	armed.Store(false)
	require.ErrorIs(t, err, errStampCut, "the pass stops with its batch recorded")

	require.NoError(t, ra.Delete(ctx, "r"))
	mustSync(t, a)
	rep, err := ra.Settle(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Voided, "the deleted receipt's number is voided")

	got, err := rb.Put(ctx, "r", Receipt{Total: 2})
	require.NoError(t, err, "B's offline edit of its pending receipt")
	require.True(t, got.Pending)
	mustSync(t, b)
	mustSync(t, a)
	_, err = rb.Get(ctx, "r")
	require.NoError(t, err, "B reads its receipt")

	_, err = rb.Settle(ctx)
	require.NoError(t, err)
	for range 2 {
		mustSync(t, a)
		mustSync(t, b)
	}
	assertConverged(t, rawHub, []stores.Store{da, db}, a, b)
	k := assertReceiptsNumbered(t, rawHub, []stores.Store{da, db}, []*vault.Numbered[Receipt]{ra, rb}, 0, true)
	assert.Equal(t, 1, k)
	got, err = rb.Get(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), got.Serial.N)
	assert.Equal(t, 2, got.Value.Total)
}
