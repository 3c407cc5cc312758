package hostile_test

import (
	"context"
	"crypto/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// selfOwner rewrites m's own keyring entry as an owner granted by
// themselves: the same box key and wrapped keys (so their secret opens
// it), a new signing key of their own that signs the grant, the MAC
// computed with the first generation's key they hold.
func selfOwner(t testing.TB, st stores.Store, m *member) {
	t.Helper()
	e := *m.entry
	e.serial++
	e.role, e.grantedBy, e.collections, e.colKeys = roleOwner, m.name, nil, nil
	seed, err := crypto.GenerateKey()
	require.NoError(t, err)
	e.signPub, err = crypto.SigningPublicKey(seed)
	require.NoError(t, err)
	e.signPriv, err = crypto.WrapKeyTo(e.boxPub, seed, wrapAD(m.name, m.header, "sign"))
	require.NoError(t, err)
	e.grantSig, err = crypto.Sign(seed, e.grantStatement(m.header))
	require.NoError(t, err)
	e.seal(m.gens[1], m.header)
	plant(t, st, &e)
}

// TestReaderCannotMakeThemselvesOwner: a reader rewrites their own
// keyring entry as an owner granted by themselves, with everything a MAC
// and a grant signature need (the first generation's key, a signing key
// of their own). Only the vault's first owner granted themselves: the
// entry is refused at open, People reports it, and a rotation gives it
// nothing.
func TestReaderCannotMakeThemselvesOwner(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := open(t, cfg(st, "olga", "o"))
			put(t, olga, "notes", "n1", "before")
			require.NoError(t, olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
			rita := keep(t, st, "rita", "r")

			selfOwner(t, st, rita)
			_, err := vault.Open(ctx, cfg(st, "rita", "r"))
			require.ErrorIs(t, err, vault.ErrTampered, "the reader opens as an owner")
			_, err = olga.People(ctx)
			require.ErrorIs(t, err, vault.ErrTampered, "People lists the self-made owner")

			rot, err := olga.RotateKeys(ctx)
			require.NoError(t, err, "an entry that fails the check does not block a rotation")
			assert.Contains(t, rot.Skipped(), "rita")
			resealed(t, olga)
			put(t, olga, "notes", "n2", "after")
			assert.False(t, opensAny(t, st, "notes", "n2", keep(t, st, "rita", "r").gens), "the rotation gave the new key to the self-made owner")
			verified(t, olga)
		})
	}
}

// TestPlantedPersonGetsNoKeys: a reader limited to one collection plants
// eve, an owner granted by herself, whose secret the reader chose. The
// keyring entry has a good MAC and a grant signature by eve's own key.
// People reports it, eve's secret opens nothing, and the owner's next
// rotation gives her no key: a record of another collection written
// afterwards opens with no key the reader or eve holds.
func TestPlantedPersonGetsNoKeys(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := open(t, cfg(st, "olga", "o"))
			put(t, olga, "secret", "s0", "old")
			require.NoError(t, olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader, "public"))
			rita := keep(t, st, "rita", "r")
			require.Len(t, rita.gens, 1, "a limited reader holds the first generation's data key only")

			eve, _ := forge(t, rita.header, rita.gens[1], rita.gens, "eve", "e", roleOwner, "eve", nil)
			plant(t, st, eve)

			_, err := olga.People(ctx)
			require.ErrorIs(t, err, vault.ErrTampered, "People lists the planted owner")
			_, err = vault.Open(ctx, cfg(st, "eve", "e"))
			require.ErrorIs(t, err, vault.ErrTampered, "the planted owner opens")

			rot, err := olga.RotateKeys(ctx)
			require.NoError(t, err)
			assert.Contains(t, rot.Skipped(), "eve")
			resealed(t, olga)
			put(t, olga, "secret", "s1", "new")
			evesKeys := keep(t, st, "eve", "e")
			assert.False(t, opensAny(t, st, "secret", "s1", evesKeys.gens, rita.gens), "the rotation handed the planted owner the new key")
			assert.False(t, opensAny(t, st, "secret", "s0", evesKeys.gens, rita.gens), "the re-sealed record opens")
			verified(t, olga)
		})
	}
}

// TestRevokedPersonCannotComeBack: carol, revoked, keeps the first
// generation's key and plants an entry (under a new name, and under her
// own in place of her revoked one) granted by itself. The next rotation,
// revoking someone else, gives neither entry the new key, so she opens no
// record written after it; People reports the plants.
func TestRevokedPersonCannotComeBack(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		for _, as := range []string{"carol2", "carol"} {
			t.Run(name+"/"+as, func(t *testing.T) {
				st := newStore(t)
				olga := open(t, cfg(st, "olga", "o"))
				require.NoError(t, olga.Grant(ctx, "carol", vault.Secret([]byte("c")), vault.RoleWriter))
				require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter))
				put(t, olga, "notes", "n0", "before")
				carol := keep(t, st, "carol", "c")
				require.NoError(t, olga.Revoke(ctx, "carol"))
				resealed(t, olga)

				back, _ := forge(t, carol.header, carol.gens[1], carol.gens, as, "c2", roleWriter, as, nil)
				plant(t, st, back)
				_, err := olga.People(ctx)
				require.ErrorIs(t, err, vault.ErrTampered)

				require.NoError(t, olga.Revoke(ctx, "will"))
				assert.Contains(t, olga.Rotation().Skipped(), as)
				resealed(t, olga)
				put(t, olga, "notes", "n1", "after")
				again := keep(t, st, as, "c2")
				assert.False(t, opensAny(t, st, "notes", "n1", again.gens, carol.gens), "the revoked person reads a record written after her revocation")
				_, err = vault.Open(ctx, cfg(st, as, "c2"))
				require.ErrorIs(t, err, vault.ErrTampered)
				verified(t, olga)
			})
		}
	}
}

// bogusEntry is what a hub, which holds no key, can plant: an entry of
// the current layout, for a person of its choosing, whose MAC and grant
// signature are random bytes.
func bogusEntry(t testing.TB, user, grantedBy string) *entry {
	t.Helper()
	rnd := func(n int) []byte {
		b := make([]byte, n)
		_, err := rand.Read(b)
		require.NoError(t, err)
		return b
	}
	id, err := crypto.GenerateIdentity()
	require.NoError(t, err)
	pub, err := id.PublicKey()
	require.NoError(t, err)
	seed, err := crypto.GenerateKey()
	require.NoError(t, err)
	spub, err := crypto.SigningPublicKey(seed)
	require.NoError(t, err)
	return &entry{user: user, serial: 1, role: roleOwner, grantedBy: grantedBy, grantedAt: 1, boxPub: pub, signPub: spub,
		lock: 2, gens: []wrapped{{gen: 1, key: rnd(80)}}, signPriv: rnd(80), grantSig: rnd(64), macGen: 1, mac: rnd(32)}
}

// hubPlantedPerson: a hub plants mallory, an owner "granted by olga",
// whose MAC and signature are bogus. Olga's device syncs: the entry is
// not copied to the device; when the hub then drops it (so that a device
// holding it would copy it back as its own), the next sync records no
// grant of mallory in the hub's ledger, signed by olga.
func hubPlantedPerson(t *testing.T, hub, device stores.Store) {
	ctx := context.Background()
	olga := open(t, onHub(device, hub, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	mustSync(t, olga)
	plant(t, hub, bogusEntry(t, "mallory", "olga"))

	mustSync(t, olga)
	_, err := device.Get(ctx, keyringKey("mallory"))
	require.ErrorIs(t, err, stores.ErrNotFound, "sync copied the hub's planted entry to the device")
	require.NoError(t, hub.Delete(ctx, keyringKey("mallory")))
	mustSync(t, olga)

	h := open(t, cfg(hub, "olga", "o"))
	for e, err := range h.Audit().Read(ctx, 1) {
		require.NoError(t, err)
		if e.Kind == ledger.PersonGranted {
			require.NotEqual(t, "mallory", e.ID, "olga's device vouched for the planted person on the hub's ledger")
		}
	}
	verified(t, h)
	ps, err := olga.People(ctx)
	require.NoError(t, err)
	assert.False(t, slices.ContainsFunc(ps, func(p vault.Person) bool { return p.Name == "mallory" }))
}

// TestHubPlantedPersonIsNeitherCopiedNorVouchedFor runs hubPlantedPerson
// on memstore and badger devices, with a memstore hub.
func TestHubPlantedPersonIsNeitherCopiedNorVouchedFor(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { hubPlantedPerson(t, memstore.New(), newStore(t)) })
	}
}

// TestHubPlantedPersonPostgresHub is the same with a PostgreSQL hub (run
// under scripts/with-postgres).
func TestHubPlantedPersonPostgresHub(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) { hubPlantedPerson(t, pgtest.Open(t, nil), newStore(t)) })
	}
}

// legacyEntry is a keyring entry of layout version 1 for user: the first
// generation's data key wrapped by the key derived from secret with the
// header's salt and cost. Anyone holding that key can write one.
func legacyEntry(t testing.TB, hdr []byte, gen1 *crypto.Key, user, secret string) []byte {
	t.Helper()
	h, err := crypto.ParseHeader(hdr)
	require.NoError(t, err)
	kek, err := crypto.DeriveUserKey([]byte(secret), h.Salt[:], h.KDF)
	require.NoError(t, err)
	w, err := crypto.WrapKey(kek, gen1, crypto.KeyAD(vaultName, "_keyring/"+user+"\x00"+string(hdr)))
	require.NoError(t, err)
	return w
}

// TestPlantedLegacyEntryBlocksNothing: in a vault created in the current
// layout, an entry of layout version 1 is a plant: junk bytes from the
// store, or a genuine wrap of the first generation's key by a reader who
// holds it. Neither opens as an owner nor is listed as one, and neither
// stops a rotation or a revocation.
func TestPlantedLegacyEntryBlocksNothing(t *testing.T) {
	ctx := context.Background()
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := open(t, cfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
			require.NoError(t, olga.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			rita := keep(t, st, "rita", "r")
			_, err := st.Put(ctx, keyringKey("junk"), []byte{1, 2, 3, 4, 5})
			require.NoError(t, err)
			_, err = st.Put(ctx, keyringKey("zed"), legacyEntry(t, rita.header, rita.gens[1], "zed", "z"))
			require.NoError(t, err)

			_, err = vault.Open(ctx, cfg(st, "zed", "z"))
			require.ErrorIs(t, err, vault.ErrTampered, "a reader's layout 1 entry opens as an owner")
			_, err = olga.People(ctx)
			require.ErrorIs(t, err, vault.ErrTampered, "People lists the plants")

			rot, err := olga.RotateKeys(ctx)
			require.NoError(t, err, "a planted layout 1 entry blocks rotation")
			assert.Subset(t, rot.Skipped(), []string{"junk", "zed"})
			require.NoError(t, olga.Revoke(ctx, "bob"), "a planted layout 1 entry blocks revocation")
			resealed(t, olga)
			put(t, olga, "notes", "n1", "after")
			assert.False(t, opensAny(t, st, "notes", "n1", rita.gens))
			verified(t, olga)
		})
	}
}
