package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// TestPasswdSameSecretUpgradesALegacyEntry: 'vault passwd' given the
// current secret as the new one rewrites a keyring entry of layout
// version 1 in the current layout (the README's way for an owner of such
// a vault to become able to add people), and is a usage error that
// changes nothing for an entry already current.
func TestPasswdSameSecretUpgradesALegacyEntry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")

	// A vault of layout version 1, as written before roles existed.
	st, err := badgerstore.Open(data, nil)
	require.NoError(t, err)
	h, err := crypto.NewHeader(testKDF)
	require.NoError(t, err)
	hb, err := h.MarshalBinary()
	require.NoError(t, err)
	_, err = st.Put(ctx, "v/team/_header", hb)
	require.NoError(t, err)
	dk, err := crypto.GenerateKey()
	require.NoError(t, err)
	kek, err := crypto.DeriveUserKey([]byte("o-secret"), h.Salt[:], h.KDF)
	require.NoError(t, err)
	w, err := crypto.WrapKey(kek, dk, crypto.KeyAD("team", "_keyring/olga\x00"+string(hb)))
	require.NoError(t, err)
	_, err = st.Put(ctx, "v/team/_keyring/olga", w)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	same := filepath.Join(dir, "same.txt")
	require.NoError(t, os.WriteFile(same, []byte("o-secret\n"), 0o600))
	env := map[string]string{"NOYDB_SECRET": "o-secret", "NOYDB_USER": "olga", envTestKDF: "1"}
	args := []string{"--store", "badger:" + data, "--vault", "team", "vault", "passwd", "--new-secret-file", same}

	legacy := func() bool {
		t.Helper()
		st, err := badgerstore.Open(data, nil)
		require.NoError(t, err)
		defer func() { _ = st.Close() }()
		db, err := noydb.Open(ctx, noydb.Config{User: "olga", Secret: []byte("o-secret"), Store: st, KDF: testKDF, InsecureAllowWeakKDF: true})
		require.NoError(t, err)
		defer func() { _ = db.Close() }()
		v, err := db.OpenVault(ctx, "team")
		require.NoError(t, err)
		ps, err := v.People(ctx)
		require.NoError(t, err)
		require.Len(t, ps, 1)
		return ps[0].Legacy
	}
	require.True(t, legacy(), "the vault starts in layout version 1")

	code, out, errs := progressRun(t, env, args...)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "rewritten in the current layout; the secret is unchanged")
	assert.False(t, legacy(), "the entry was upgraded")

	code, _, errs = progressRun(t, env, args...)
	assert.Equal(t, 2, code, "the same secret again, on a current entry")
	assert.Contains(t, errs, "the new secret is the current one: nothing was changed")
	assert.False(t, legacy())
}
