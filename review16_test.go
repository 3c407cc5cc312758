package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReview16RegrantBeforeSyncReachesHub: an owner revokes bob on a
// device of a hub and grants him again (a new secret, a new signing key)
// before one Sync. The hub used to keep bob's first entry: its ledger
// named only the first grant, so the copy preferred the entry agreeing
// with it, and bob's new secret opened nothing there. Now the hub's
// ledger records the revocation and the new grant, the hub holds the new
// entry, bob's new handle writes through the hub, his old one is refused,
// and the hub's ledger verifies.
func TestReview16RegrantBeforeSyncReachesHub(t *testing.T) {
	ctx := context.Background()
	for _, rotate := range []bool{false, true} {
		name := "without rotation"
		if rotate {
			name = "with rotation"
		}
		t.Run(name, func(t *testing.T) {
			hub, devA := memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			mustSync(t, a)
			b := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b1", Note{Text: "b"}))
			mustSync(t, b)

			var opts []vault.RevokeOption
			if !rotate {
				opts = append(opts, vault.RevokeWithoutRotation())
			}
			require.NoError(t, a.Revoke(ctx, "bob", opts...))
			if r := a.Rotation(); r != nil {
				require.NoError(t, r.Wait(ctx))
			}
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b2")), vault.RoleWriter))
			key := keyringKeyOf(t, devA, "bob")
			regranted, err := devA.Get(ctx, key)
			require.NoError(t, err)
			mustSync(t, a)

			onA, err := devA.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, regranted.Value, onA.Value, "device A keeps bob's new entry")
			onHub, err := hub.Get(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, regranted.Value, onHub.Value, "the hub holds bob's new entry")

			// bob's old handle is refused; his new one writes through the hub.
			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b2", Note{Text: "late"}))
			_, err = b.Sync(ctx)
			assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's old handle")
			c := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b2"))
			require.NoError(t, vault.CollectionOf[Note](c, "notes").Put(ctx, "c1", Note{Text: "again"}))
			mustSync(t, c)

			h := openPerson(t, personCfg(hub, "olga", "o"))
			verified(t, h)
			got, err := vault.CollectionOf[Note](h, "notes").Get(ctx, "c1")
			require.NoError(t, err)
			assert.Equal(t, "again", got.Text)
			_, err = vault.CollectionOf[Note](h, "notes").Get(ctx, "b2")
			assert.ErrorIs(t, err, vault.ErrNotFound, "the old handle's write stays off the hub")
			var people []string
			for _, e := range signedBy(t, h) {
				if e.Kind == ledger.PersonGranted || e.Kind == ledger.PersonRevoked {
					people = append(people, e.Actor+" "+e.Kind.String()+" "+e.ID)
				}
			}
			assert.Equal(t, []string{"olga person-granted bob", "olga person-revoked bob", "olga person-granted bob"}, people)
		})
	}
}
