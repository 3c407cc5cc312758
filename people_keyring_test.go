package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// writeV1Vault writes the vault "team" as main's code did before the
// keyring had versions: a header and, for each user, the data key wrapped
// by the key derived from the user's secret with the header's salt, bound
// to vault, user and header. It returns the data key.
func writeV1Vault(t testing.TB, st stores.Store, users map[string]string) *crypto.Key {
	t.Helper()
	ctx := context.Background()
	h, err := crypto.NewHeader(cheapKDF)
	require.NoError(t, err)
	hb, err := h.MarshalBinary()
	require.NoError(t, err)
	_, err = st.Put(ctx, "v/team/_header", hb)
	require.NoError(t, err)
	dk, err := crypto.GenerateKey()
	require.NoError(t, err)
	for user, secret := range users {
		kek, err := crypto.DeriveUserKey([]byte(secret), h.Salt[:], h.KDF)
		require.NoError(t, err)
		w, err := crypto.WrapKey(kek, dk, crypto.KeyAD("team", "_keyring/"+user+"\x00"+string(hb)))
		require.NoError(t, err)
		_, err = st.Put(ctx, "v/team/_keyring/"+user, w)
		require.NoError(t, err)
	}
	return dk
}

// TestPeopleV1Vault: a vault whose keyring is of layout version 1 opens
// (its users are owners), refuses to grant until its owner upgrades, and
// after the upgrade grants; the other version 1 user keeps opening.
func TestPeopleV1Vault(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	writeV1Vault(t, st, map[string]string{"olga": "o-secret", "otto": "t-secret"})

	v := openPerson(t, personCfg(st, "olga", "o-secret"))
	assert.Equal(t, vault.RoleOwner, v.Role())
	require.NoError(t, vault.CollectionOf[Note](v, "notes").Put(ctx, "n1", Note{Text: "old"}))
	_, err := vault.Open(ctx, personCfg(st, "olga", "wrong"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	assert.ErrorIs(t, v.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader), vault.ErrNotPermitted)
	ps, err := v.People(ctx)
	require.NoError(t, err)
	assert.Equal(t, []vault.Person{{Name: "olga", Role: vault.RoleOwner, Legacy: true},
		{Name: "otto", Role: vault.RoleOwner, Legacy: true}}, ps)

	assert.ErrorIs(t, v.UpgradeKeyring(ctx, []byte("wrong")), vault.ErrWrongSecret)
	require.NoError(t, v.UpgradeKeyring(ctx, []byte("o-secret")))
	require.NoError(t, v.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	require.NoError(t, v.UpgradeKeyring(ctx, []byte("o-secret")), "a current entry is left alone")

	again := openPerson(t, personCfg(st, "olga", "o-secret"))
	n, err := vault.CollectionOf[Note](again, "notes").Get(ctx, "n1")
	require.NoError(t, err)
	assert.Equal(t, "old", n.Text)
	r := openPerson(t, personCfg(st, "rita", "r"))
	n, err = vault.CollectionOf[Note](r, "notes").Get(ctx, "n1")
	require.NoError(t, err)
	assert.Equal(t, "old", n.Text)
	assert.Equal(t, vault.RoleOwner, openPerson(t, personCfg(st, "otto", "t-secret")).Role())
	verified(t, again)
	assert.Equal(t, []string{"keyring-upgraded olga olga", "person-granted olga rita"}, peopleKinds(t, again))
}

// roleOffset is the offset of the role byte in the keyring entry of user:
// magic and version, the user's name, a one-byte serial.
func roleOffset(user string) int { return 4 + 1 + 1 + len(user) + 1 }

// TestPeopleTamperedKeyring: a store that raises a reader's role to owner
// in the keyring entry, or swaps two people's entries, is caught
// (ErrTampered) by the person opening and by the owner listing people.
func TestPeopleTamperedKeyring(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	require.NoError(t, owner.Grant(ctx, "wanda", vault.Secret([]byte("r")), vault.RoleWriter))
	it, err := st.Get(ctx, "v/team/_keyring/rita")
	require.NoError(t, err)
	good := it.Value
	require.Equal(t, byte(vault.RoleReader), good[roleOffset("rita")])

	raised := append([]byte(nil), good...)
	raised[roleOffset("rita")] = byte(vault.RoleOwner)
	_, err = st.Put(ctx, "v/team/_keyring/rita", raised)
	require.NoError(t, err)
	_, err = vault.Open(ctx, personCfg(st, "rita", "r"))
	assert.ErrorIs(t, err, vault.ErrTampered)
	assert.NotErrorIs(t, err, vault.ErrWrongSecret)
	_, err = owner.People(ctx)
	assert.ErrorIs(t, err, vault.ErrTampered)
	assert.ErrorIs(t, owner.Grant(ctx, "rita", vault.Secret([]byte("x")), vault.RoleOwner), vault.ErrTampered)

	// Wanda's entry under rita's name: same secret, another person.
	w, err := st.Get(ctx, "v/team/_keyring/wanda")
	require.NoError(t, err)
	_, err = st.Put(ctx, "v/team/_keyring/rita", w.Value)
	require.NoError(t, err)
	_, err = vault.Open(ctx, personCfg(st, "rita", "r"))
	assert.ErrorIs(t, err, vault.ErrTampered)

	// A truncated entry.
	_, err = st.Put(ctx, "v/team/_keyring/rita", good[:len(good)-3])
	require.NoError(t, err)
	_, err = vault.Open(ctx, personCfg(st, "rita", "r"))
	assert.ErrorIs(t, err, vault.ErrTampered)

	_, err = st.Put(ctx, "v/team/_keyring/rita", good)
	require.NoError(t, err)
	assert.Equal(t, vault.RoleReader, openPerson(t, personCfg(st, "rita", "r")).Role())
}

// TestPeopleKDFCeiling: a keyring entry asking for more key derivation
// than the opener's ceiling is refused before any derivation; the store
// cannot raise it either (the cost is under the entry's MAC, and the
// ceiling is checked before the MAC can be).
func TestPeopleKDFCeiling(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	cfg := personCfg(st, "rita", "r")
	cfg.MaxKDF = crypto.KDFParams{Time: 1, MemoryKiB: 32, Threads: 1}
	_, err := vault.Open(ctx, cfg)
	assert.ErrorIs(t, err, vault.ErrWeakKDF)
	assert.ErrorIs(t, err, crypto.ErrKDFTooCostly)
}

// TestPeopleBadInput: every bad call gets a typed error and writes nothing.
func TestPeopleBadInput(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	_, pub := newIdentity(t)
	before := snapshot(t, st)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	sec := vault.Secret([]byte("s"))
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"empty user", owner.Grant(ctx, "", sec, vault.RoleReader), vault.ErrInvalidName},
		{"reserved user", owner.Grant(ctx, "_x", sec, vault.RoleReader), vault.ErrReservedName},
		{"bad role", owner.Grant(ctx, "bob", sec, vault.Role(9)), vault.ErrInvalidArgument},
		{"zero role", owner.Grant(ctx, "bob", sec, 0), vault.ErrInvalidArgument},
		{"no credential", owner.Grant(ctx, "bob", vault.Credential{}, vault.RoleReader), vault.ErrInvalidArgument},
		{"empty secret", owner.Grant(ctx, "bob", vault.Secret(nil), vault.RoleReader), vault.ErrInvalidArgument},
		{"short key", owner.Grant(ctx, "bob", vault.PublicKey(pub[:31]), vault.RoleReader), crypto.ErrBadPublicKey},
		{"small-order key", owner.Grant(ctx, "bob", vault.PublicKey(make([]byte, 32)), vault.RoleReader), crypto.ErrBadPublicKey},
		{"existing", owner.Grant(ctx, "rita", sec, vault.RoleWriter), vault.ErrPersonExists},
		{"existing owner", owner.Grant(ctx, "olga", sec, vault.RoleWriter), vault.ErrPersonExists},
		{"limited owner", owner.Grant(ctx, "bob", sec, vault.RoleOwner, "notes"), vault.ErrInvalidArgument},
		{"bad collection", owner.Grant(ctx, "bob", sec, vault.RoleReader, "notes", ""), vault.ErrInvalidName},
		{"reserved collection", owner.Grant(ctx, "bob", sec, vault.RoleReader, "_ledger"), vault.ErrReservedName},
		{"cancelled limited grant", owner.Grant(cancelled, "bob", sec, vault.RoleReader, "notes"), context.Canceled},
		{"cancelled grant", owner.Grant(cancelled, "bob", sec, vault.RoleReader), context.Canceled},
		{"unknown revoke", owner.Revoke(ctx, "nobody"), vault.ErrNotFound},
		{"empty revoke", owner.Revoke(ctx, ""), vault.ErrInvalidName},
		{"cancelled revoke", owner.Revoke(cancelled, "rita"), context.Canceled},
		{"cancelled change", owner.ChangeSecret(cancelled, []byte("o"), []byte("n")), context.Canceled},
	}
	for _, c := range cases {
		assert.ErrorIs(t, c.err, c.want, c.name)
	}
	_, err := owner.People(cancelled)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, before, snapshot(t, st), "nothing written")
	assert.NotContains(t, sec.String(), "s)")
	_, err = vault.ParseRole("admin")
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
}

// TestPeopleIdentity: a person granted to a public key opens with their
// identity only: another identity, a secret, or nothing gets
// ErrWrongSecret; once revoked, ErrNoAccess.
func TestPeopleIdentity(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	id, pub := newIdentity(t)
	require.NoError(t, owner.Grant(ctx, "ivy", vault.PublicKey(pub), vault.RoleWriter))
	other, _ := newIdentity(t)
	for name, cfg := range map[string]vault.Config{
		"other identity": func() vault.Config { c := personCfg(st, "ivy", ""); c.Identity = other; return c }(),
		"a secret":       personCfg(st, "ivy", "o"),
	} {
		_, err := vault.Open(ctx, cfg)
		assert.ErrorIs(t, err, vault.ErrWrongSecret, name)
	}
	_, err := vault.Open(ctx, personCfg(st, "ivy", ""))
	assert.ErrorIs(t, err, vault.ErrWrongSecret, "no secret, no identity")
	cfg := personCfg(st, "ivy", "")
	cfg.Identity = id
	assert.Equal(t, vault.RoleWriter, openPerson(t, cfg).Role())
	// Text forms round-trip.
	text, err := crypto.EncodeIdentity(id)
	require.NoError(t, err)
	back, err := crypto.ParseIdentity(text)
	require.NoError(t, err)
	cfg.Identity = back
	openPerson(t, cfg)

	require.NoError(t, owner.Revoke(ctx, "ivy"))
	_, err = vault.Open(ctx, cfg)
	assert.ErrorIs(t, err, vault.ErrNoAccess)
}
