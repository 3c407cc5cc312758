package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// A store that deletes this user's keyring entry of a vault that holds data
// must not get the vault re-keyed: opening fails with ErrNoAccess and writes
// nothing, and the old data key still opens everything once the entry is back.
func TestDeletedKeyringEntryIsNoAccess(t *testing.T) {
	fill := map[string]func(t testing.TB, v *vault.Vault){
		"records": func(t testing.TB, v *vault.Vault) {
			require.NoError(t, vault.CollectionOf[Invoice](v, "invoices").Put(context.Background(), "inv-1", Invoice{Total: 7}))
		},
		"sequence": func(t testing.TB, v *vault.Vault) {
			seq, err := v.Sequence("invoice", sequence.Options{})
			require.NoError(t, err)
			_, err = seq.Next(context.Background())
			require.NoError(t, err)
		},
		"ledger only": func(t testing.TB, v *vault.Vault) {
			_, err := v.Record(context.Background(), "note", []byte("x"))
			require.NoError(t, err)
		},
		"another user": func(t testing.TB, v *vault.Vault) {}, // the key slot of "clerk" is added below
	}
	for storeName, newStore := range memAndBadger() {
		for what, add := range fill {
			t.Run(storeName+"/"+what, func(t *testing.T) {
				ctx := context.Background()
				adv := faultstore.NewAdversary(newStore(t))
				db := openDB(t, adv.Store(), "firm", "firm-secret")
				v := openVault(t, db, "books")
				add(t, v)
				require.NoError(t, db.Close())
				if what == "another user" {
					// A second key slot: copy firm's under another name. It does
					// not open for anyone, but it is a key slot all the same.
					snap, err := adv.Snapshot(ctx)
					require.NoError(t, err)
					require.NoError(t, adv.Set(ctx, "v/books/_keyring/clerk", snap["v/books/_keyring/firm"]))
				}
				snap, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				slot := snap["v/books/_keyring/firm"]
				require.NotEmpty(t, slot)

				require.NoError(t, adv.Drop(ctx, "v/books/_keyring/firm"))
				before, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				db2 := openDB(t, adv.Store(), "firm", "firm-secret")
				_, err = db2.OpenVault(ctx, "books")
				require.ErrorIs(t, err, noydb.ErrNoAccess)
				after, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				assert.Equal(t, before, after, "a refused open writes nothing")

				// The slot comes back: the old data key still opens the vault.
				require.NoError(t, adv.Set(ctx, "v/books/_keyring/firm", slot))
				db3 := openDB(t, adv.Store(), "firm", "firm-secret")
				v3 := openVault(t, db3, "books")
				rep, err := v3.Audit().Verify(ctx)
				require.NoError(t, err)
				assert.True(t, rep.OK())
			})
		}
	}
}

// A vault holding its header and nothing else (its creator crashed before
// writing the keyring, on a store without transactions) is finished by the
// next opener.
func TestHeaderOnlyVaultIsFinished(t *testing.T) {
	for storeName, newStore := range memAndBadger() {
		t.Run(storeName, func(t *testing.T) {
			ctx := context.Background()
			adv := faultstore.NewAdversary(newStore(t))
			db := openDB(t, adv.Store(), "firm", "firm-secret")
			openVault(t, db, "books")
			require.NoError(t, db.Close())
			keys, err := adv.Keys(ctx, "v/books/")
			require.NoError(t, err)
			require.Equal(t, []string{"v/books/_header", "v/books/_keyring/firm"}, keys)
			require.NoError(t, adv.Drop(ctx, "v/books/_keyring/firm"))

			db2 := openDB(t, adv.Store(), "firm", "firm-secret")
			v := openVault(t, db2, "books")
			c := vault.CollectionOf[Invoice](v, "invoices")
			require.NoError(t, c.Put(ctx, "inv-1", Invoice{Total: 3}))
			got, err := c.Get(ctx, "inv-1")
			require.NoError(t, err)
			assert.Equal(t, 3, got.Total)
		})
	}
}

func memstoreNew() stores.Store { return memstore.New() }
