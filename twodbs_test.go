package noydb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// Two DBs of one process over one badger Store share its named locks (the
// ledger takes one per batch): the tests of what that must not break.

// twoDBsOnBadger opens two DBs of one process on one durable badger Store,
// and the vault "books" through each.
func twoDBsOnBadger(t *testing.T) (*badgerstore.Store, *vault.Vault, *vault.Vault) {
	t.Helper()
	st, err := badgerstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st, openVault(t, openDB(t, st, "firm", "s"), "books"), openVault(t, openDB(t, st, "firm", "s"), "books")
}

// vaultLedger is the writable ledger of v, which the vault's API does not
// hand out (Audit is read-only), reached through internal/wire.
func vaultLedger(v *vault.Vault) wire.Ledger[ledger.Entry, ledger.Head, ledger.Report] {
	return wire.Hook[func(*vault.Vault) wire.Ledger[ledger.Entry, ledger.Head, ledger.Report]]("VaultLedger", wire.VaultLedger)(v)
}

// Two DBs of one process over one badger Store: a write of one DB made from
// inside a ledger Update of the other, on the same vault. Before the
// store's lock was held for every batch, the inner write committed and the
// outer batch retried past it; with the lock held, the inner batch waits
// for the outer one, which waits for it.
func TestNestedWriteAcrossTwoDBs(t *testing.T) {
	ctx := context.Background()
	_, v1, v2 := twoDBsOnBadger(t)
	c2 := vault.CollectionOf[string](v2, "notes")

	var inner error
	err := vaultLedger(v1).Update(ctx, func(stores.Tx) error {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		inner = c2.Put(ictx, "n", "written from inside the other DB's batch")
		return nil
	})
	require.NoError(t, err)
	assert.NoError(t, inner, "the inner write waits for the outer batch, which waits for it")
}

// A closure that panics inside a batch releases the store's lock with the
// batch: the next write of either DB over the Store goes through, without
// waiting out the ledger's patience for the lock.
func TestPanicReleasesStoreLock(t *testing.T) {
	ctx := context.Background()
	st, v1, v2 := twoDBsOnBadger(t)

	require.NoError(t, vault.CollectionOf[string](v1, "notes").Put(ctx, "k", "before"))
	var head string
	for key := range snapshot(t, st) {
		if strings.HasSuffix(key, "/_ledger/head") {
			head = key
		}
	}
	require.NotEmpty(t, head)
	assert.PanicsWithValue(t, "boom", func() {
		_ = vaultLedger(v1).Update(ctx, func(stores.Tx) error { panic("boom") })
	})
	// The head's lock is free (a lock left held fails the take when the
	// bound ends).
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	unlock, err := st.Lock(tctx, head)
	cancel()
	require.NoError(t, err, "the head's lock was left held")
	unlock()
	require.NoError(t, vault.CollectionOf[string](v2, "notes").Put(ctx, "n", "after the panic"))
	require.NoError(t, vault.CollectionOf[string](v1, "notes").Put(ctx, "m", "after the panic"))
}
