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

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// switchedHub is a hub that can be taken down: while down, every operation
// fails with an error wrapping stores.ErrUnavailable (as pgstore reports a
// server it cannot reach), and calls counts the operations tried.
type switchedHub struct {
	stores.Store
	down  atomic.Bool
	calls atomic.Int64
}

func newSwitchedHub() *switchedHub {
	h := &switchedHub{}
	h.Store = faultstore.New(memstore.New(), faultstore.Options{Before: func(faultstore.Op, string) error {
		if h.down.Load() {
			h.calls.Add(1)
			return fmt.Errorf("dial tcp 127.0.0.1:5432: connection refused: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	return h
}

// Update and TryLock/Lock keep the faultstore's optional interfaces.
func (h *switchedHub) Update(ctx context.Context, fn func(stores.Tx) error) error {
	return h.Store.(stores.Transactor).Update(ctx, fn)
}

// TestHubOfflineFailsFastAndTakesNothing: with the hub down, Next and
// PutNumbered on a device fail at once with sequence.ErrOffline wrapping
// the cause (stores.ErrUnavailable), after one attempt each; records still
// write locally, deferred numbering still hands records off locally. Back
// online, the next number is 1: nothing was taken.
func TestHubOfflineFailsFastAndTakesNothing(t *testing.T) {
	ctx := context.Background()
	hub, dev := newSwitchedHub(), memstore.New()
	v := openOnHub(t, dev, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	inv := vault.CollectionOf[Invoice](v, "invoices")
	receipts := vault.CollectionOf[Receipt](v, "receipts")
	nr, err := vault.NumberingOf(receipts, "receipt", sequence.Options{}, func(r *Receipt, s sequence.Serial) { r.Number = s.N })
	require.NoError(t, err)
	assert.False(t, nr.Online(), "a device numbers receipts in passes on the hub")

	hub.down.Store(true)
	_, err = q.Next(ctx)
	require.ErrorIs(t, err, sequence.ErrOffline)
	assert.ErrorIs(t, err, stores.ErrUnavailable)
	assert.Equal(t, int64(1), hub.calls.Load(), "Next tried the hub once")

	hub.calls.Store(0)
	_, err = inv.PutNumbered(ctx, "a", q, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: s.Formatted}, nil
	})
	require.ErrorIs(t, err, sequence.ErrOffline)
	assert.ErrorIs(t, err, stores.ErrUnavailable)
	assert.Equal(t, int64(1), hub.calls.Load(), "PutNumbered tried the hub once")
	_, err = inv.Get(ctx, "a")
	assert.ErrorIs(t, err, vault.ErrNotFound)

	require.NoError(t, inv.Put(ctx, "b", Invoice{Customer: "ACME"}), "records write locally")
	got, err := inv.Get(ctx, "b")
	require.NoError(t, err)
	assert.Equal(t, "ACME", got.Customer)
	r, err := nr.Put(ctx, "r1", Receipt{Total: 5})
	require.NoError(t, err, "a deferred-numbered record writes locally")
	assert.True(t, r.Pending)
	_, err = nr.Settle(ctx)
	assert.ErrorIs(t, err, sequence.ErrOffline, "the pass runs on the hub")

	hub.down.Store(false)
	s, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), s, "nothing was taken while offline")
}

// TestHubOpenOffline: a device that holds the vault opens it with the hub
// down and works locally; its first call that reaches the hub once it is
// back copies its keyring there first. A device that never held the vault
// cannot open it offline: ErrOffline.
func TestHubOpenOffline(t *testing.T) {
	ctx := context.Background()
	hub, dev := newSwitchedHub(), memstore.New()
	require.NoError(t, openOnHub(t, dev, hub, deviceOpts{}).Close())

	hub.down.Store(true)
	_, err := openOnHubErr(memstore.New(), hub, deviceOpts{})
	require.ErrorIs(t, err, sequence.ErrOffline)

	v := openOnHub(t, dev, hub, deviceOpts{})
	inv := vault.CollectionOf[Invoice](v, "invoices")
	require.NoError(t, inv.Put(ctx, "a", Invoice{Customer: "ACME"}))
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.ErrorIs(t, err, sequence.ErrOffline)

	hub.down.Store(false)
	s, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), s)
}

// TestHubFreshVaultOpenedOffline: a device opening, offline, a vault the
// hub has never held works locally; its header and keyring reach the hub
// at its first call there once it is back, and another device then opens
// the vault from the hub.
func TestHubFreshVaultOpenedOffline(t *testing.T) {
	ctx := context.Background()
	hub, devA := newSwitchedHub(), memstore.New()
	// The vault exists on device A only (created without a hub).
	a0, err := vault.Open(ctx, vault.Config{Store: devA, Name: "shop", User: "alice", Secret: []byte("s3cret"),
		KDF: cheapKDF, InsecureAllowWeakKDF: true})
	require.NoError(t, err)
	require.NoError(t, a0.Close())

	hub.down.Store(true)
	v := openOnHub(t, devA, hub, deviceOpts{})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.ErrorIs(t, err, sequence.ErrOffline)

	hub.down.Store(false)
	_, err = hub.Get(ctx, "v/shop/_header")
	require.ErrorIs(t, err, stores.ErrNotFound, "the hub got the vault while down")
	s, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), s)
	_, err = hub.Get(ctx, "v/shop/_header")
	require.NoError(t, err)
	b := openOnHub(t, memstore.New(), hub, deviceOpts{})
	qb, err := b.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	s, err = qb.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s)
}

// stallingHub is a hub that, while stalled, answers nothing: each
// operation waits for its context to end (a server that accepted the
// connection and hangs).
type stallingHub struct {
	stores.Store
	stalled atomic.Bool
}

func (h *stallingHub) wait(ctx context.Context) error {
	if !h.stalled.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *stallingHub) Get(ctx context.Context, key string) (stores.Item, error) {
	if err := h.wait(ctx); err != nil {
		return stores.Item{}, err
	}
	return h.Store.Get(ctx, key)
}

func (h *stallingHub) Update(ctx context.Context, fn func(stores.Tx) error) error {
	if err := h.wait(ctx); err != nil {
		return err
	}
	return h.Store.(stores.Transactor).Update(ctx, fn)
}

// TestHubTimeoutIsOffline: a hub that does not answer within the device's
// HubTimeout is offline (ErrOffline, wrapping context.DeadlineExceeded);
// the caller's own cancelled context is the caller's error, not ErrOffline.
func TestHubTimeoutIsOffline(t *testing.T) {
	ctx := context.Background()
	hub := &stallingHub{Store: memstore.New()}
	v := openOnHub(t, memstore.New(), hub, deviceOpts{timeout: 50 * time.Millisecond})
	q, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)

	hub.stalled.Store(true)
	_, err = q.Next(ctx)
	require.ErrorIs(t, err, sequence.ErrOffline)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = q.Next(cctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, sequence.ErrOffline), "a cancelled caller is not an offline hub: %v", err)

	hub.stalled.Store(false)
	s, err := q.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), s)
}

// TestHubDeviceOpenedWithoutHub: a vault used on this device with a hub,
// opened later without it (an app that could not reach the hub at start),
// takes no numbers from the device's own counters, which would collide
// with the hub's: Sequence fails with ErrOffline; records and deferred
// numbering still write locally, and a pass is refused. The device knows
// it from its store's mark, or from its state folder.
func TestHubDeviceOpenedWithoutHub(t *testing.T) {
	ctx := context.Background()
	hub, dev := memstore.New(), memstore.New()
	dir := t.TempDir()
	require.NoError(t, openOnHub(t, dev, hub, deviceOpts{stateDir: dir}).Close())

	alone := func(stateDir string) {
		v, err := vault.Open(ctx, vault.Config{Store: dev, Name: "shop", User: "alice", Secret: []byte("s3cret"),
			KDF: cheapKDF, InsecureAllowWeakKDF: true, StateDir: stateDir})
		require.NoError(t, err)
		defer v.Close()
		_, err = v.Sequence("invoice", sequence.Options{})
		require.ErrorIs(t, err, sequence.ErrOffline)
		require.NoError(t, vault.CollectionOf[Invoice](v, "invoices").Put(ctx, "a", Invoice{Customer: "ACME"}))
		nr, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
		require.NoError(t, err)
		assert.False(t, nr.Online())
		r, err := nr.Put(ctx, "r1", Receipt{Total: 1})
		require.NoError(t, err)
		assert.True(t, r.Pending)
		_, err = nr.Settle(ctx)
		require.ErrorIs(t, err, sequence.ErrOffline)
	}
	alone("")
	require.NoError(t, dev.Delete(ctx, "v/shop/_device"))
	alone(dir)

	assert.Empty(t, keysUnder(t, dev, "v/shop/_sequences/"), "no counter on the device")
}
