package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
)

// pickUser: the vault's only user, $USER for a vault without key slots, and
// a usage error naming the users of a vault with several. The command
// cannot give a vault a second user, so the key slots are written here at
// the keys the vault package documents.
func TestPickUser(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	put := func(key string) {
		_, err := st.Put(ctx, key, []byte{1})
		require.NoError(t, err)
	}
	put("v/books/_header")
	put("v/books/_keyring/carol")
	put("v/books/_keyring/alice")
	put("v/books/_keyring/bob")
	put("v/one/_header")
	put("v/one/_keyring/dora")
	put("v/one/_keyringx") // not a key slot
	put("v/bare/_header")

	pick := func(vaultName, user string, exists bool) (string, error) {
		a := &app{vaultName: vaultName, user: user, io: stdio{lookupEnv: func(k string) (string, bool) {
			if k == "USER" {
				return "tester", true
			}
			return "", false
		}}}
		err := a.pickUser(ctx, st, exists)
		return a.user, err
	}

	got, err := pick("one", "", true)
	require.NoError(t, err)
	assert.Equal(t, "dora", got, "the only user")

	got, err = pick("bare", "", true)
	require.NoError(t, err)
	assert.Equal(t, "tester", got, "no key slot: $USER")

	got, err = pick("new", "", false)
	require.NoError(t, err)
	assert.Equal(t, "tester", got, "a new vault: $USER")

	got, err = pick("books", "bob", true)
	require.NoError(t, err)
	assert.Equal(t, "bob", got, "--user chooses")

	_, err = pick("books", "", true)
	require.Error(t, err)
	assert.True(t, isUsage(err), "a usage error: %v", err)
	assert.EqualError(t, err, `vault "books" has 3 users (alice, bob, carol): say which you are with --user NAME, $NOYDB_USER, or once for all with 'noydb config set user NAME'`)
}
