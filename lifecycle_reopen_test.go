package noydb_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// A vault whose own Close waits for a call in flight is opened anew at
// once by OpenVault, from another goroutine and from the call in flight
// itself; the new handle shares the rollback pins with the closing one and
// numbers on where it stopped; ForgetVault is refused until the old
// handle's Close has ended, and DB.Close closes the new one.
func TestReopenWhileOwnCloseWaits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openWithState(t, memstore.New(), dir)
	v1 := openVault(t, db, "books")
	invoices := vault.CollectionOf[Invoice](v1, "invoices")
	require.NoError(t, invoices.Put(ctx, "a", Invoice{Total: 1}))
	nextN(t, mustSeq(t, v1, "inv"), 2)

	closed := make(chan error, 1)
	var v2 *vault.Vault
	for _, err := range invoices.List(ctx) { // a call in flight on v1
		require.NoError(t, err)
		go func() { closed <- v1.Close() }()
		for !v1.Closed() {
			// Close has begun once the gate refuses; it then waits for
			// this List.
			select {
			case err := <-closed:
				t.Fatalf("Close returned during a call in flight: %v", err)
			default:
				runtime.Gosched()
			}
		}
		var err error
		v2, err = db.OpenVault(ctx, "books") // from the call in flight
		require.NoError(t, err)
		assert.NotSame(t, v1, v2)
		assert.False(t, v2.Closed())
		again, err := db.OpenVault(ctx, "books")
		require.NoError(t, err)
		assert.Same(t, v2, again, "one handle while it is open")

		n, err := mustSeq(t, v2, "inv").Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(3), n)
		require.NoError(t, v2.Close())
		assert.Error(t, db.ForgetVault(ctx, "books"), "the old handle's pins are still open")
	}
	require.NoError(t, <-closed)

	v3 := openVault(t, db, "books")
	n, err := mustSeq(t, v3, "inv").Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), n)
	require.NoError(t, db.Close())
	assert.True(t, v3.Closed())
	_, err = db.OpenVault(ctx, "books")
	assert.ErrorIs(t, err, noydb.ErrClosed)
}
