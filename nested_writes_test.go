package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// Two DBs of one process over one badger Store: a write of one DB made from
// inside a ledger Update of the other, on the same vault. Before the
// store's lock was held for every batch, the inner write committed and the
// outer batch retried past it; with the lock held, the inner batch waits
// for the outer one, which waits for it.
func TestNestedWriteAcrossTwoDBs(t *testing.T) {
	ctx := context.Background()
	st, err := badgerstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	v1 := openVault(t, openDB(t, st, "firm", "s"), "books")
	v2 := openVault(t, openDB(t, st, "firm", "s"), "books")
	c2 := vault.CollectionOf[string](v2, "notes")

	var inner error
	err = v1.Ledger().Update(ctx, func(stores.Tx) error {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		inner = c2.Put(ictx, "n", "written from inside the other DB's batch")
		return nil
	})
	require.NoError(t, err)
	assert.NoError(t, inner, "the inner write waits for the outer batch, which waits for it")
}
