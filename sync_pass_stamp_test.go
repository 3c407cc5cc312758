package noydb_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// errLostAfterCommit is what lostStamp returns for a transaction it let
// commit: the caller cannot tell it committed (a connection lost after the
// commit).
var errLostAfterCommit = errors.New("connection lost after the commit")

// lostStamp is a hub store whose next transaction that writes a record of
// the collection named by suffix (armed) commits, then fails with
// errLostAfterCommit: a pass's stamp that reached the hub, seen failed.
type lostStamp struct {
	stores.Store
	tx     stores.Transactor
	suffix string
	armed  atomic.Bool
}

func (s *lostStamp) Update(ctx context.Context, fn func(stores.Tx) error) error {
	var wrote bool
	err := s.tx.Update(ctx, func(tx stores.Tx) error {
		wrote = false
		return fn(watchPut{Tx: tx, put: func(key string) { wrote = wrote || strings.Contains(key, s.suffix) }})
	})
	if err == nil && wrote && s.armed.CompareAndSwap(true, false) {
		return errLostAfterCommit
	}
	return err
}

// watchPut is a transaction that reports the keys it puts.
type watchPut struct {
	stores.Tx
	put func(key string)
}

func (w watchPut) Put(key string, value []byte) error {
	w.put(key)
	return w.Tx.Put(key, value)
}

// TestSyncWaitsForAPassStampNotInTheFeed: a pass on the hub stamps a
// pending receipt, then stops before it records the number in the hub's
// feed (its stamp committed, reported failed). Device B, which changed
// the receipt meanwhile, syncs: the hub's revision of it is newer than
// the one its feed names, a hub write in flight as a pull sees it, not
// ErrHubTampered as the push used to say of an honest hub. B's change is
// kept and reported in Rejected; once a pass has recorded the number, B's
// next Sync pushes it with the hub's number.
func TestSyncWaitsForAPassStampNotInTheFeed(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	hubA := &lostStamp{Store: hub, tx: hub, suffix: "/receipts/r1"}
	va, ra := receiptDevice(t, memstore.New(), hubA, vault.DeviceWins)
	vb, rb := receiptDevice(t, memstore.New(), hub, vault.DeviceWins)
	_, err := ra.Put(ctx, "r1", Receipt{Total: 10})
	require.NoError(t, err)
	mustSync(t, va)
	mustSync(t, vb)
	r, err := rb.Put(ctx, "r1", Receipt{Total: 11})
	require.NoError(t, err)
	require.True(t, r.Pending)

	hubA.armed.Store(true)
	_, err = ra.Settle(ctx)
	require.ErrorIs(t, err, errLostAfterCommit)
	require.False(t, hubA.armed.Load(), "the stamp reached the hub")

	rep, err := vb.Sync(ctx)
	require.NoError(t, err, "an honest hub: a pass's stamp not in its feed yet")
	require.NotEmpty(t, rep.Rejected)
	for _, x := range rep.Rejected {
		assert.Equal(t, "r1", x.ID)
	}

	_, err = ra.Settle(ctx)
	require.NoError(t, err)
	mustSync(t, vb)
	mustSync(t, va)
	for name, nr := range map[string]*vault.Numbered[Receipt]{"A": ra, "B": rb} {
		got, err := nr.Get(ctx, "r1")
		require.NoError(t, err, name)
		assert.Equal(t, Receipt{Number: 1, Total: 11}, got.Value, "device %s: B's change, with the hub's number", name)
	}
	got, err := hubReceipt(t, hub, "r1")
	require.NoError(t, err)
	assert.Equal(t, Receipt{Number: 1, Total: 11}, got.Value)
	verified(t, va)
	verified(t, vb)
}
