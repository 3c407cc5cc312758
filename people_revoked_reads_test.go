package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/vault"
)

// TestRevokedHandleReadsAreNoAccess: bob's handle, opened before olga
// revoked him (with the rotation), reads records re-sealed or written
// since under keys he never held. The read fails with ErrNoAccess and
// not ErrTampered: nothing was altered, and an application that raises
// a tampering alarm on ErrTampered must not raise it for a revocation.
func TestRevokedHandleReadsAreNoAccess(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			notes := vault.CollectionOf[Note](owner, "notes")
			require.NoError(t, notes.Put(ctx, "before", Note{Text: "x"}))
			_, err := vault.CollectionOf[Note](bob, "notes").Get(ctx, "before")
			require.NoError(t, err, "control: bob reads before the revocation")

			require.NoError(t, owner.Revoke(ctx, "bob"))
			require.NoError(t, owner.Rotation().Wait(ctx))
			require.NoError(t, notes.Put(ctx, "after", Note{Text: "y"}))
			for _, id := range []string{"before", "after"} {
				_, err := vault.CollectionOf[Note](bob, "notes").Get(ctx, id)
				assert.ErrorIs(t, err, vault.ErrNoAccess, id)
				assert.NotErrorIs(t, err, vault.ErrTampered, id)
			}
		})
	}
}
