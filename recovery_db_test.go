package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestDBChangeSecret: db.ChangeSecret changes the secret of one vault, open
// in the DB or not; the old secret fails, the new one opens.
func TestDBChangeSecret(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	db := openDB(t, st, "olga", "old")
	openVault(t, db, "books")
	require.NoError(t, db.ChangeSecret(ctx, "books", []byte("old"), []byte("new")))
	// Not open in this DB: opened with old for the call.
	db2 := openDB(t, st, "olga", "old")
	openVault(t, db2, "ledger")
	require.NoError(t, db2.Close())
	require.NoError(t, db.ChangeSecret(ctx, "ledger", []byte("old"), []byte("new2")))

	assert.ErrorIs(t, db.ChangeSecret(ctx, "ledger", []byte("old"), []byte("x")), noydb.ErrWrongSecret)
	assert.ErrorIs(t, db.ChangeSecret(ctx, "books", []byte("old"), nil), vault.ErrInvalidArgument)
	require.NoError(t, db.Close())
	assert.ErrorIs(t, db.ChangeSecret(ctx, "books", []byte("new"), []byte("x")), noydb.ErrClosed)

	_, err := openDB(t, st, "olga", "old").OpenVault(ctx, "books")
	assert.ErrorIs(t, err, noydb.ErrWrongSecret)
	openVault(t, openDB(t, st, "olga", "new"), "books")
	openVault(t, openDB(t, st, "olga", "new2"), "ledger")
}

// TestDBRecoverVault: a DB opened with the new secret recovers a vault with
// a code; the code is used up and the old secret fails.
func TestDBRecoverVault(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	db := openDB(t, st, "olga", "lost")
	v := openVault(t, db, "books")
	codes, err := v.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	require.NoError(t, vault.CollectionOf[Invoice](v, "invoices").Put(ctx, "i1", Invoice{Total: 7}))
	// Open in this DB: not recovered.
	_, err = db.RecoverVault(ctx, "books", codes[0])
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	require.NoError(t, db.Close())

	fresh := openDB(t, st, "olga", "found")
	_, err = fresh.RecoverVault(ctx, "books", "")
	assert.ErrorIs(t, err, vault.ErrBadRecoveryCode)
	_, err = fresh.RecoverVault(ctx, "books", codes[0][:10])
	assert.ErrorIs(t, err, vault.ErrBadRecoveryCode)
	r, err := fresh.RecoverVault(ctx, "books", codes[0])
	require.NoError(t, err)
	got, err := vault.CollectionOf[Invoice](r, "invoices").Get(ctx, "i1")
	require.NoError(t, err)
	assert.Equal(t, 7, got.Total)
	// The DB returns the same vault afterwards.
	same, err := fresh.OpenVault(ctx, "books")
	require.NoError(t, err)
	assert.Same(t, r, same)
	require.NoError(t, fresh.Close())

	_, err = openDB(t, st, "olga", "lost").OpenVault(ctx, "books")
	assert.ErrorIs(t, err, noydb.ErrWrongSecret)
	openVault(t, openDB(t, st, "olga", "found"), "books")
	_, err = openDB(t, st, "olga", "again").RecoverVault(ctx, "books", codes[0])
	assert.ErrorIs(t, err, noydb.ErrRecoveryCodeUsed)
	other, err := crypto.NewRecoveryCode()
	require.NoError(t, err)
	_, err = openDB(t, st, "olga", "again").RecoverVault(ctx, "books", other)
	assert.ErrorIs(t, err, noydb.ErrRecoveryCodeRefused)
	_, err = openDB(t, st, "olga", "again").RecoverVault(ctx, "books", "nope")
	assert.ErrorIs(t, err, noydb.ErrBadRecoveryCode)
}

// TestDBIdentity: a DB opened with an identity and no secret opens a vault
// where an owner granted the identity's public key.
func TestDBIdentity(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openVault(t, openDB(t, st, "olga", "o"), "books")
	id, err := crypto.GenerateIdentity()
	require.NoError(t, err)
	pub, err := id.PublicKey()
	require.NoError(t, err)
	require.NoError(t, owner.Grant(ctx, "ida", vault.PublicKey(pub), vault.RoleReader))

	db, err := noydb.Open(ctx, noydb.Config{User: "ida", Identity: id, Store: st, KDF: cheapKDF, InsecureAllowWeakKDF: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	v, err := db.OpenVault(ctx, "books")
	require.NoError(t, err)
	assert.Equal(t, vault.RoleReader, v.Role())
	_, err = db.RecoverVault(ctx, "other", "x")
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	_, err = noydb.Open(ctx, noydb.Config{User: "ida", Store: st})
	assert.Error(t, err)
}
