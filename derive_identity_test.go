package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/vault"
)

// The identity DeriveIdentity unlocks from a person's secret opens the
// vault as that person without the secret (and without a derivation);
// it opens nothing else, survives a change of secret, and stops opening
// once the person is revoked.
func TestDerivedIdentityOpensAsThePerson(t *testing.T) {
	ctx := context.Background()
	for name, open := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			owner := openVault(t, openDB(t, st, "alice", "s3cret"), "books")
			c := vault.CollectionOf[Stub](owner, "stubs")
			require.NoError(t, c.Put(ctx, "a", Stub{Desk: "x"}))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleWriter))
			openVault(t, openDB(t, st, "alice", "s3cret"), "other")

			cfg := func(user, secret string) vault.Config {
				return vault.Config{Store: st, Name: "books", User: user, Secret: []byte(secret), KDF: cheapKDF, InsecureAllowWeakKDF: true}
			}
			_, err := vault.DeriveIdentity(ctx, cfg("alice", "wrong"))
			require.ErrorIs(t, err, vault.ErrWrongSecret)
			_, err = vault.DeriveIdentity(ctx, cfg("carol", "x"))
			require.ErrorIs(t, err, vault.ErrNoAccess)
			none := cfg("alice", "s3cret")
			none.Name = "nothing"
			_, err = vault.DeriveIdentity(ctx, none)
			require.ErrorIs(t, err, vault.ErrNotFound)

			id, err := vault.DeriveIdentity(ctx, cfg("bob", "bob-secret"))
			require.NoError(t, err)
			assert.Equal(t, "crypto.Identity(REDACTED)", id.String())
			withID := func(user, vaultName string, id *crypto.Identity) (*vault.Vault, error) {
				c := cfg(user, "")
				c.Secret, c.Identity, c.Name = nil, id, vaultName
				return vault.Open(ctx, c)
			}
			v, err := withID("bob", "books", id)
			require.NoError(t, err)
			got, err := vault.CollectionOf[Stub](v, "stubs").Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, "x", got.Desk)
			require.NoError(t, vault.CollectionOf[Stub](v, "stubs").Put(ctx, "b", Stub{Desk: "y"}))
			assert.Equal(t, vault.RoleWriter, v.Role())
			require.NoError(t, v.Close())

			// Not another person of the vault, not another vault.
			_, err = withID("alice", "books", id)
			require.ErrorIs(t, err, vault.ErrWrongSecret)
			_, err = withID("bob", "other", id)
			require.ErrorIs(t, err, vault.ErrNoAccess)

			// A new secret makes a new identity (the old one opens no
			// more: a new key pair); a revocation ends it.
			require.NoError(t, openDB(t, st, "bob", "bob-secret").ChangeSecret(ctx, "books", []byte("bob-secret"), []byte("new")))
			_, err = withID("bob", "books", id)
			require.ErrorIs(t, err, vault.ErrWrongSecret, "the identity of the old secret")
			id, err = vault.DeriveIdentity(ctx, cfg("bob", "new"))
			require.NoError(t, err)
			v, err = withID("bob", "books", id)
			require.NoError(t, err)
			require.NoError(t, v.Close())
			require.NoError(t, owner.Revoke(ctx, "bob"))
			_, err = withID("bob", "books", id)
			require.ErrorIs(t, err, vault.ErrNoAccess)
			_, err = vault.DeriveIdentity(ctx, cfg("bob", "new"))
			require.ErrorIs(t, err, vault.ErrNoAccess)

			// A person who opens with an identity already derives none.
			pid, err := crypto.GenerateIdentity()
			require.NoError(t, err)
			pub, err := pid.PublicKey()
			require.NoError(t, err)
			require.NoError(t, owner.Grant(ctx, "dora", vault.PublicKey(pub), vault.RoleReader))
			_, err = vault.DeriveIdentity(ctx, cfg("dora", "x"))
			require.ErrorIs(t, err, vault.ErrInvalidArgument)
		})
	}
}
