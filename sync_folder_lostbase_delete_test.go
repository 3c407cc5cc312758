package noydb_test

import (
	"context"
	"fmt"
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

// recordCut cuts a device's store just after the sync wrote one record
// key: that write applies, every store operation after it fails (a kill
// -9 between a staged commit's record and its sync base).
type recordCut struct {
	key   string
	armed atomic.Bool
	cut   atomic.Bool
}

func (c *recordCut) before(faultstore.Op, string) error {
	if c.armed.Load() && c.cut.Load() {
		return errCut
	}
	return nil
}

func (c *recordCut) after(op faultstore.Op, key string) error {
	if c.armed.Load() && op.IsWrite() && key == c.key {
		c.cut.Store(true)
	}
	return nil
}

// TestSyncFileFolderLostBaseThenLocalDelete: a file-folder device B pulls
// a pending receipt written on A; the pull is cut just after the record's
// write, before its sync base. B's next sync finishes the intent (the hub
// unreachable: nothing else), then B deletes the receipt, and its next
// sync applies the window again, cut at the same place. Then A deletes
// the receipt too (the hub drops it with its handoff entry), and every
// device syncs and settles. B's deletion is its own change: the window
// applied again must not bring the receipt back as if B never had it (it
// came back pending, was pushed to the hub again, without a handoff entry
// anywhere, and no pass ever numbered it). The receipt ends deleted
// everywhere, no handoff entry is left, and the devices and the hub
// converge.
func TestSyncFileFolderLostBaseThenLocalDelete(t *testing.T) {
	lostBaseThenLocalDelete(t, true)
}

// lostBaseThenLocalDelete runs the sequence; recover: a sync with the hub
// down finishes the cut pull's intent before B's deletion.
func lostBaseThenLocalDelete(t *testing.T, recover bool) {
	ctx := context.Background()
	const pending = "v/shop/_numbering/receipt/pending/"
	rawHub, rawA, rawB := memstore.New(), memstore.New(), newFolder(t)
	var down atomic.Bool
	hubB := faultstore.New(rawHub, faultstore.Options{Before: func(faultstore.Op, string) error {
		if down.Load() {
			return fmt.Errorf("dial tcp 127.0.0.1:5432: connection refused: %w", stores.ErrUnavailable)
		}
		return nil
	}})
	c := &recordCut{key: "v/shop/receipts/r"}
	a := syncDevice(t, rawA, rawHub)
	b := syncDevice(t, faultstore.New(rawB, faultstore.Options{Before: c.before, After: c.after}), hubB)
	defer func() { _ = a.Close(); _ = b.Close() }()
	ra, err := vault.NumberingOf(vault.CollectionOf[Receipt](a, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	rb, err := vault.NumberingOf(vault.CollectionOf[Receipt](b, "receipts"), "receipt", sequence.Options{}, setReceiptNumber)
	require.NoError(t, err)
	r, err := ra.Put(ctx, "r", Receipt{Total: 7})
	require.NoError(t, err)
	require.True(t, r.Pending)
	mustSync(t, a)

	// cutSync syncs B, cut just after it writes the receipt, if it does.
	cutSync := func() bool {
		t.Helper()
		c.cut.Store(false)
		c.armed.Store(true)
		_, err := b.Sync(ctx)
		c.armed.Store(false)
		if c.cut.Load() {
			require.ErrorIs(t, err, errCut)
			return true
		}
		require.NoError(t, err)
		return false
	}
	require.True(t, cutSync(), "B's first pull writes the receipt")
	if recover {
		down.Store(true)
		_, err = b.Sync(ctx)
		down.Store(false)
		require.ErrorIs(t, err, stores.ErrUnavailable, "the hub is down: B only finishes its intent")
	}
	got, err := rb.Get(ctx, "r")
	require.NoError(t, err)
	require.True(t, got.Pending, "B holds the pulled receipt")
	require.NoError(t, rb.Delete(ctx, "r"))
	// Applied again, the window writes the receipt back only if it takes
	// B's deletion for no change (cut there, like the first pull).
	cutSync()
	require.NoError(t, ra.Delete(ctx, "r"))
	mustSync(t, a)

	for range 2 {
		for _, v := range []*vault.Vault{b, a} {
			_, err := v.SyncAndSettle(ctx)
			require.NoError(t, err)
		}
	}
	assertConverged(t, rawHub, []stores.Store{rawA, rawB}, a, b)
	for i, nr := range []*vault.Numbered[Receipt]{ra, rb} {
		_, err := nr.Get(ctx, "r")
		assert.ErrorIs(t, err, vault.ErrNotFound, "device %d: both devices deleted the receipt", i)
	}
	assert.Empty(t, keysUnder(t, rawA, pending), "A")
	assert.Empty(t, keysUnder(t, rawB, pending), "B")
	assert.Empty(t, keysUnder(t, rawHub, pending), "hub")
	_, err = rawHub.Get(ctx, "v/shop/receipts/r")
	assert.ErrorIs(t, err, stores.ErrNotFound, "the hub holds no receipt r (pending without a handoff entry: never numbered)")
}

// TestSyncFileFolderLostBaseThenLocalDeleteUnrecovered is
// TestSyncFileFolderLostBaseThenLocalDelete with B's deletion made before
// any sync finished the cut pull's intent: the intent's record is not at
// its state, so the window is applied again (and cut again after the
// receipt's write); the same end.
func TestSyncFileFolderLostBaseThenLocalDeleteUnrecovered(t *testing.T) {
	lostBaseThenLocalDelete(t, false)
}
