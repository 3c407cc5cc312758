package noydb_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// A closure that panics inside a batch releases the store's lock with the
// batch: the next write of either DB over the Store goes through, without
// waiting out the ledger's patience for the lock.
func TestPanicReleasesStoreLock(t *testing.T) {
	ctx := context.Background()
	st, err := badgerstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	v1 := openVault(t, openDB(t, st, "firm", "s"), "books")
	v2 := openVault(t, openDB(t, st, "firm", "s"), "books")

	require.NoError(t, vault.CollectionOf[string](v1, "notes").Put(ctx, "k", "before"))
	var head string
	for key := range snapshot(t, st) {
		if strings.HasSuffix(key, "/_ledger/head") {
			head = key
		}
	}
	require.NotEmpty(t, head)
	assert.PanicsWithValue(t, "boom", func() {
		_ = v1.Ledger().Update(ctx, func(stores.Tx) error { panic("boom") })
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
