package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// lostReplyHub commits its transactions but, while lose is set, answers
// the next one with a broken connection: the device cannot tell whether
// the commit happened.
type lostReplyHub struct {
	*memstore.Store
	lose atomic.Bool
}

func (h *lostReplyHub) Update(ctx context.Context, fn func(stores.Tx) error) error {
	err := h.Store.Update(ctx, fn)
	if err == nil && h.lose.CompareAndSwap(true, false) {
		return fmt.Errorf("connection reset after commit: %w", stores.ErrUnavailable)
	}
	return err
}

// TestHubPutNumberedReplyLost: the hub commits a PutNumbered and the
// reply is lost. The device gets ErrOffline; its retry takes no second
// number and brings the record to the device; the next record gets the
// next number: 1, 2, no gap, nothing twice.
func TestHubPutNumberedReplyLost(t *testing.T) {
	ctx := context.Background()
	hub := &lostReplyHub{Store: memstore.New()}
	dev := memstore.New()
	v := openOnHub(t, dev, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")
	build := func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted, Customer: "ACME"}, nil
	}
	hub.lose.Store(true)
	_, err = inv.PutNumbered(ctx, "a", q, build)
	require.ErrorIs(t, err, sequence.ErrOffline)
	_, err = hub.Get(ctx, "v/shop/invoices/a")
	require.NoError(t, err, "the lost reply was the record's commit")

	got, err := inv.PutNumbered(ctx, "a", q, build)
	require.NoError(t, err)
	assert.Equal(t, "1", got.Number)
	got, err = inv.PutNumbered(ctx, "b", q, build)
	require.NoError(t, err)
	assert.Equal(t, "2", got.Number)
	for id, want := range map[string]string{"a": "1", "b": "2"} {
		r, err := inv.Get(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, want, r.Number, id)
		hit, err := hub.Get(ctx, "v/shop/invoices/"+id)
		require.NoError(t, err)
		dit, err := dev.Get(ctx, "v/shop/invoices/"+id)
		require.NoError(t, err)
		assert.Equal(t, hit.Value, dit.Value, id)
	}
	n, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), uint64(n))
}

// TestHubCallerDeadlineIsNotOffline: a caller's own deadline, shorter
// than the hub's timeout, ending while the hub does not answer, is the
// caller's error (context.DeadlineExceeded), not ErrOffline; also for Sync.
func TestHubCallerDeadlineIsNotOffline(t *testing.T) {
	hub := &stallingHub{Store: memstore.New()}
	v := openOnHub(t, memstore.New(), hub, deviceOpts{timeout: time.Hour})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	hub.stalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = q.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, errors.Is(err, sequence.ErrOffline), "the caller's deadline is not an offline hub: %v", err)
	_, err = v.Sync(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, errors.Is(err, sequence.ErrOffline), "the caller's deadline is not an offline hub: %v", err)
}
