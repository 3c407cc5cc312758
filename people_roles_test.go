package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// personCfg is the Config of user on st for the vault "team".
func personCfg(st stores.Store, user, secret string) vault.Config {
	cfg := vault.Config{Store: st, Name: "team", User: user, KDF: cheapKDF, InsecureAllowWeakKDF: true}
	if secret != "" {
		cfg.Secret = []byte(secret)
	}
	return cfg
}

// openPerson opens the vault "team" as cfg says and closes it with the test.
func openPerson(t testing.TB, cfg vault.Config) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// newIdentity returns an X25519 identity and its public key.
func newIdentity(t testing.TB) (*crypto.Identity, []byte) {
	t.Helper()
	id, err := crypto.GenerateIdentity()
	require.NoError(t, err)
	pub, err := id.PublicKey()
	require.NoError(t, err)
	return id, pub
}

// peopleKinds returns the people entries of v's ledger as "kind actor id".
func peopleKinds(t testing.TB, v *vault.Vault) []string {
	t.Helper()
	var out []string
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		switch e.Kind {
		case ledger.PersonGranted, ledger.PersonRevoked, ledger.SecretChanged, ledger.KeyringUpgraded:
			out = append(out, e.Kind.String()+" "+e.Actor+" "+e.ID)
		}
	}
	return out
}

// verified asserts that v's ledger verifies.
func verified(t testing.TB, v *vault.Vault) {
	t.Helper()
	rep, err := v.Audit().Verify(context.Background())
	require.NoError(t, err)
	assert.NoError(t, rep.Problem)
}

// TestPeopleRoles: an owner grants a writer and a reader, each with a
// secret and with a public key; each opens and can do exactly what its
// role allows. Every call a reader may not make fails with ErrNotPermitted
// and leaves the store's bytes as they were.
func TestPeopleRoles(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "owner-secret"))
			assert.Equal(t, vault.RoleOwner, owner.Role())
			wid, wpub := newIdentity(t)
			rid, rpub := newIdentity(t)
			require.NoError(t, owner.Grant(ctx, "wanda", vault.Secret([]byte("w-secret")), vault.RoleWriter))
			require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r-secret")), vault.RoleReader))
			require.NoError(t, owner.Grant(ctx, "wim", vault.PublicKey(wpub), vault.RoleWriter))
			require.NoError(t, owner.Grant(ctx, "rex", vault.PublicKey(rpub), vault.RoleReader))
			require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "n1", Note{Text: "hello"}))
			seq, err := owner.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			_, err = seq.Next(ctx)
			require.NoError(t, err)

			ps, err := owner.People(ctx)
			require.NoError(t, err)
			got := map[string]string{}
			for _, p := range ps {
				got[p.Name] = p.Role.String() + "/" + p.GrantedBy
				assert.False(t, p.Revoked)
				assert.Len(t, p.SigningKey, 32)
				assert.Equal(t, p.Name == "wim" || p.Name == "rex", p.Identity, p.Name)
			}
			assert.Equal(t, map[string]string{"olga": "owner/olga", "wanda": "writer/olga", "rita": "reader/olga",
				"wim": "writer/olga", "rex": "reader/olga"}, got)

			writerCfg := personCfg(st, "wim", "")
			writerCfg.Identity = wid
			readerCfg := personCfg(st, "rex", "")
			readerCfg.Identity = rid
			writers := map[string]vault.Config{"wanda": personCfg(st, "wanda", "w-secret"), "wim": writerCfg}
			readers := map[string]vault.Config{"rita": personCfg(st, "rita", "r-secret"), "rex": readerCfg}
			for who, cfg := range writers {
				w := openPerson(t, cfg)
				assert.Equal(t, vault.RoleWriter, w.Role(), who)
				notes := vault.CollectionOf[Note](w, "notes")
				n, err := notes.Get(ctx, "n1")
				require.NoError(t, err, who)
				assert.Equal(t, "hello", n.Text)
				require.NoError(t, notes.Put(ctx, "by-"+who, Note{Text: who}))
				s, err := w.Sequence("inv", sequence.Options{})
				require.NoError(t, err)
				_, err = s.Next(ctx)
				require.NoError(t, err, who)
				_, err = w.Record(ctx, "hello", nil)
				require.NoError(t, err)
				assert.ErrorIs(t, w.Grant(ctx, "eve", vault.Secret([]byte("x")), vault.RoleOwner), vault.ErrNotPermitted)
				assert.ErrorIs(t, w.Revoke(ctx, "rita"), vault.ErrNotPermitted)
			}
			for who, cfg := range readers {
				r := openPerson(t, cfg)
				assert.Equal(t, vault.RoleReader, r.Role(), who)
				notes := vault.CollectionOf[Note](r, "notes")
				n, err := notes.Get(ctx, "n1")
				require.NoError(t, err, who)
				assert.Equal(t, "hello", n.Text)
				before := snapshot(t, st)
				s, err := r.Sequence("inv", sequence.Options{})
				require.NoError(t, err)
				numbered, err := vault.NumberingOf(notes, "later", sequence.Options{}, func(n *Note, s sequence.Serial) { n.Text = s.Formatted })
				require.NoError(t, err)
				refused := map[string]error{
					"put":    notes.Put(ctx, "x", Note{Text: "no"}),
					"delete": notes.Delete(ctx, "n1"),
					"grant":  r.Grant(ctx, "eve", vault.Secret([]byte("x")), vault.RoleReader),
					"revoke": r.Revoke(ctx, "wanda"),
				}
				_, refused["update"] = notes.Update(ctx, "n1", func(n *Note) error { n.Text = "no"; return nil })
				_, refused["next"] = s.Next(ctx)
				_, refused["record"] = r.Record(ctx, "no", nil)
				_, refused["put-numbered"] = notes.PutNumbered(ctx, "y", s, func(sequence.Serial) (Note, error) { return Note{}, nil })
				refused["tx-next"] = r.Update(ctx, func(tx *vault.Tx) error { _, err := tx.Next(s); return err })
				_, refused["numbering-put"] = numbered.Put(ctx, "z", Note{})
				for call, err := range refused {
					assert.ErrorIs(t, err, vault.ErrNotPermitted, "%s: %s", who, call)
				}
				assert.Equal(t, before, snapshot(t, st), "%s wrote nothing", who)
				verified(t, r)
			}
			verified(t, owner)
			assert.Equal(t, []string{"person-granted olga wanda", "person-granted olga rita",
				"person-granted olga wim", "person-granted olga rex"}, peopleKinds(t, owner))
		})
	}
}

// TestPeopleRevoke: a revoked person's secret no longer opens; only an
// owner revokes, never the last owner; an owner may be granted and
// revoked; a revoked person can be granted again.
func TestPeopleRevoke(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "owner-secret"))
	require.NoError(t, owner.Grant(ctx, "wanda", vault.Secret([]byte("w-secret")), vault.RoleWriter))
	require.NoError(t, owner.Grant(ctx, "otto", vault.Secret([]byte("o-secret")), vault.RoleOwner))
	openPerson(t, personCfg(st, "wanda", "w-secret"))

	w := openPerson(t, personCfg(st, "wanda", "w-secret"))
	assert.ErrorIs(t, w.Revoke(ctx, "otto"), vault.ErrNotPermitted)

	require.NoError(t, owner.Revoke(ctx, "wanda"))
	_, err := vault.Open(ctx, personCfg(st, "wanda", "w-secret"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)
	_, err = vault.Open(ctx, personCfg(st, "wanda", "wrong"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)

	// Two owners: either may go, but not both.
	otto := openPerson(t, personCfg(st, "otto", "o-secret"))
	require.NoError(t, otto.Revoke(ctx, "olga"))
	require.NoError(t, otto.Rotation().Wait(ctx), "the rotation of the revocation ends before the snapshot")
	before := snapshot(t, st)
	assert.ErrorIs(t, otto.Revoke(ctx, "otto"), vault.ErrNotPermitted, "the last owner stays")
	assert.Equal(t, before, snapshot(t, st))
	_, err = vault.Open(ctx, personCfg(st, "olga", "owner-secret"))
	assert.ErrorIs(t, err, vault.ErrNoAccess)

	// A revoked person may be granted again, with a new secret.
	require.NoError(t, otto.Grant(ctx, "wanda", vault.Secret([]byte("w-new")), vault.RoleReader))
	assert.Equal(t, vault.RoleReader, openPerson(t, personCfg(st, "wanda", "w-new")).Role())

	ps, err := otto.People(ctx)
	require.NoError(t, err)
	revoked := map[string]bool{}
	for _, p := range ps {
		revoked[p.Name] = p.Revoked
	}
	assert.Equal(t, map[string]bool{"olga": true, "otto": false, "wanda": false}, revoked)
	verified(t, otto)
	assert.Equal(t, []string{"person-granted olga wanda", "person-granted olga otto", "person-revoked olga wanda",
		"person-revoked otto olga", "person-granted otto wanda"}, peopleKinds(t, otto))
}

// TestPeopleChangeSecret: after a change the old secret fails with
// ErrWrongSecret and the new one opens; a wrong old secret changes
// nothing; a reader may change their own secret.
func TestPeopleChangeSecret(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "old"))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r-old")), vault.RoleReader))
	before := snapshot(t, st)
	assert.ErrorIs(t, owner.ChangeSecret(ctx, []byte("not-it"), []byte("new")), vault.ErrWrongSecret)
	assert.ErrorIs(t, owner.ChangeSecret(ctx, []byte("old"), nil), vault.ErrInvalidArgument)
	assert.Equal(t, before, snapshot(t, st))

	require.NoError(t, owner.ChangeSecret(ctx, []byte("old"), []byte("new")))
	_, err := vault.Open(ctx, personCfg(st, "olga", "old"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	again := openPerson(t, personCfg(st, "olga", "new"))
	assert.Equal(t, vault.RoleOwner, again.Role())
	// The owner's signing key is unchanged: grants made before still verify.
	openPerson(t, personCfg(st, "rita", "r-old"))

	r := openPerson(t, personCfg(st, "rita", "r-old"))
	require.NoError(t, r.ChangeSecret(ctx, []byte("r-old"), []byte("r-new")))
	_, err = vault.Open(ctx, personCfg(st, "rita", "r-old"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	assert.Equal(t, vault.RoleReader, openPerson(t, personCfg(st, "rita", "r-new")).Role())

	// A person with an identity has no secret to change.
	id, pub := newIdentity(t)
	require.NoError(t, again.Grant(ctx, "ivy", vault.PublicKey(pub), vault.RoleWriter))
	icfg := personCfg(st, "ivy", "")
	icfg.Identity = id
	assert.ErrorIs(t, openPerson(t, icfg).ChangeSecret(ctx, []byte("x"), []byte("y")), vault.ErrInvalidArgument)
	verified(t, again)
	assert.Equal(t, []string{"person-granted olga rita", "secret-changed olga olga", "secret-changed rita rita",
		"person-granted olga ivy"}, peopleKinds(t, again))
}
