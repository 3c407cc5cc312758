package vault

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
)

// A collection definition changed once is read back as written, sealed
// to its key (the store cannot move it to another collection), on a
// store with transactions and on one without; a change that changes
// nothing writes nothing.
func TestCollectionDefStoredSealed(t *testing.T) {
	all := internalStores()
	all["filestore"] = func(t testing.TB) stores.Store {
		st, err := filestore.Open(t.TempDir(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	for name, newStore := range all {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			v := openTestVault(t, st)
			d, err := v.collectionDef(ctx, "invoices")
			require.NoError(t, err)
			assert.Empty(t, d.series, "no definition: the zero one")

			bind := func(series string) func(*collectionDef) bool {
				return func(d *collectionDef) bool { return d.bind(series) }
			}
			changed, err := v.changeCollectionDef(ctx, "invoices", bind("inv"))
			require.NoError(t, err)
			assert.True(t, changed)
			changed, err = v.changeCollectionDef(ctx, "invoices", bind("cn"))
			require.NoError(t, err)
			assert.True(t, changed)
			before := storeKeys(t, st)
			changed, err = v.changeCollectionDef(ctx, "invoices", bind("inv"))
			require.NoError(t, err)
			assert.False(t, changed)
			assert.Equal(t, before, storeKeys(t, st), "a change that changes nothing writes nothing")

			d, err = v.collectionDef(ctx, "invoices")
			require.NoError(t, err)
			assert.Equal(t, []string{"cn", "inv"}, d.series)
			assert.True(t, d.binds("inv"))
			assert.False(t, d.binds("receipts"))

			// Moved to another collection's key: tampered.
			it, err := st.Get(ctx, v.collectionDefKey("invoices"))
			require.NoError(t, err)
			_, err = st.Put(ctx, v.collectionDefKey("customers"), it.Value)
			require.NoError(t, err)
			_, err = v.collectionDef(ctx, "customers")
			assert.ErrorIs(t, err, ErrTampered)
		})
	}
}
