package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// badNames are names that must not reach a store key: invalid UTF-8, line
// breaks and other control characters, as series names are checked.
var badNames = map[string]string{
	"invalid UTF-8":   "books\xff",
	"lone surrogate":  "bo\xed\xa0\x80ks",
	"newline":         "books\nforged: yes",
	"carriage return": "books\r",
	"tab":             "bo\tks",
	"NUL":             "bo\x00ks",
	"escape":          "bo\x1b[31mks",
	"DEL":             "bo\x7fks",
	"C1 control":      "bo\u0085ks",
}

func TestVaultNamesAreValidated(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	db := openDB(t, adv.Store(), "firm", "s")
	for what, name := range badNames {
		_, err := db.OpenVault(ctx, name)
		assert.ErrorIs(t, err, noydb.ErrInvalidName, what)
		assert.ErrorIs(t, vault.CheckVaultName(name), vault.ErrInvalidName, what)
	}
	keys, err := adv.Keys(ctx, "")
	require.NoError(t, err)
	assert.Empty(t, keys, "a refused vault name writes nothing")

	for _, ok := range []string{"books", "Bücher 2026", "libros-ñ", "帳簿"} {
		assert.NoError(t, vault.CheckVaultName(ok), ok)
	}
}

func TestCollectionNamesAreValidated(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	db := openDB(t, adv.Store(), "firm", "s")
	v := openVault(t, db, "books")
	before, err := adv.Snapshot(ctx)
	require.NoError(t, err)
	for what, name := range badNames {
		c := vault.CollectionOf[Invoice](v, name)
		assert.ErrorIs(t, c.Put(ctx, "x", Invoice{}), vault.ErrInvalidName, what)
		_, err := c.Get(ctx, "x")
		assert.ErrorIs(t, err, vault.ErrInvalidName, what)
		assert.ErrorIs(t, vault.CheckCollectionName(name), vault.ErrInvalidName, what)
	}
	after, err := adv.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused collection name writes nothing")
	assert.NoError(t, vault.CollectionOf[Invoice](v, "Rechnungen-ü").Put(ctx, "x", Invoice{}))
}

func TestUserNamesAreValidated(t *testing.T) {
	ctx := context.Background()
	for what, name := range badNames {
		db, err := noydb.Open(ctx, noydb.Config{User: name, Secret: []byte("s"), KDF: cheapKDF, InsecureAllowWeakKDF: true})
		require.NoError(t, err)
		_, err = db.OpenVault(ctx, "books")
		assert.ErrorIs(t, err, noydb.ErrInvalidName, what)
		require.NoError(t, db.Close())
	}
}
