package noydb_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/codec"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// heldKeys unwraps, by hand from the raw keyring entry (layout version 2,
// as vault/keyring.go documents it), every data key generation a person
// who opens with secret holds: what a person who kept their entry and
// secret can compute without the vault.
func heldKeys(t testing.TB, vaultName, user, secret string, header, entry []byte) map[uint64]*crypto.Key {
	t.Helper()
	require.True(t, strings.HasPrefix(string(entry), "NOYK"))
	r := codec.NewReader(entry[4:])
	r.Version(2)
	require.Equal(t, user, r.String(1<<10))
	r.Uvarint()  // serial
	r.Byte()     // role
	r.Bool()     // revoked
	r.String(64) // granted by
	r.Varint()   // granted at
	for range r.Count(1<<12, 1) {
		r.String(1 << 10)
	}
	r.Bytes(64) // box public key
	r.Bytes(64) // signing public key
	require.Equal(t, byte(1), r.Byte(), "a secret lock")
	salt := r.Bytes(64)
	kdf := crypto.KDFParams{Time: uint32(r.Uvarint()), MemoryKiB: uint32(r.Uvarint()), Threads: uint8(r.Uvarint())}
	boxPriv := r.Bytes(256)
	type wrapped struct {
		gen uint64
		key []byte
	}
	var gens []wrapped
	for range r.Count(1<<12, 2) {
		gens = append(gens, wrapped{gen: r.Uvarint(), key: r.Bytes(256)})
	}
	require.NoError(t, r.Err())
	ad := func(purpose string) []byte {
		return crypto.KeyAD(vaultName, "_keyring/"+user+"\x00"+string(header)+"\x00"+purpose)
	}
	kek, err := crypto.DeriveUserKey([]byte(secret), salt, kdf)
	require.NoError(t, err)
	box, err := crypto.UnwrapKey(kek, boxPriv, ad("box"))
	require.NoError(t, err)
	id := crypto.IdentityFromKey(box)
	out := map[uint64]*crypto.Key{}
	for _, g := range gens {
		k, err := crypto.UnwrapKeyWith(id, g.key, ad("gen/"+strconv.FormatUint(g.gen, 10)))
		require.NoError(t, err)
		out[g.gen] = k
	}
	return out
}

// opensWith reports whether the raw record at key (collection/id in vault
// "team") opens with any of keys, or with a collection's key derived from
// one of them (crypto.CollectionKey: records of generation 2 and later are
// sealed so), trying each whatever generation the envelope names.
func opensWith(t testing.TB, st stores.Store, coll, id string, keys map[uint64]*crypto.Key) bool {
	t.Helper()
	it, err := st.Get(context.Background(), "v/team/"+coll+"/"+id)
	require.NoError(t, err)
	for _, k := range keys {
		for _, k := range []*crypto.Key{k, crypto.CollectionKey(k, coll)} {
			if _, _, err := crypto.OpenRecord(k, it.Value, crypto.RecordRef{Vault: "team", Collection: coll, ID: id}); err == nil {
				return true
			}
		}
	}
	return false
}

// TestRotateRevokedPersonKeysOpenNothingNew: bob, a writer granted before
// a first rotation, holds generations 1 and 2. Revoke rotates to
// generation 3: his secret no longer opens the vault, and once the
// re-sealing has finished no record, written before or after the
// revocation, opens with any key he ever held (unwrapped by hand from his
// last keyring entry with his secret, and tried on the raw store). The
// same keys did open the records before (the control), and the owner
// reads every record throughout.
func TestRotateRevokedPersonKeysOpenNothingNew(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleWriter))
			notes := vault.CollectionOf[Note](owner, "notes")
			for i := range 20 {
				require.NoError(t, notes.Put(ctx, fmt.Sprintf("before-%02d", i), Note{Text: strconv.Itoa(i)}))
			}
			rot, err := owner.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			assert.Equal(t, uint64(2), rot.Generation())

			// Bob writes with generation 2, and his entry holds 1 and 2.
			bob := openPerson(t, personCfg(st, "bob", "bob-secret"))
			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "by-bob", Note{Text: "b"}))
			require.NoError(t, bob.Close())
			hdr, err := st.Get(ctx, "v/team/_header")
			require.NoError(t, err)
			entry, err := st.Get(ctx, "v/team/_keyring/bob")
			require.NoError(t, err)
			bobKeys := heldKeys(t, "team", "bob", "bob-secret", hdr.Value, entry.Value)
			require.Len(t, bobKeys, 2)
			assert.True(t, opensWith(t, st, "notes", "before-00", bobKeys), "control: bob's keys open a record sealed before")
			assert.True(t, opensWith(t, st, "notes", "by-bob", bobKeys), "control")

			require.NoError(t, owner.Revoke(ctx, "bob"))
			rot = owner.Rotation()
			require.NotNil(t, rot)
			assert.Equal(t, uint64(3), rot.Generation())
			for i := range 20 {
				require.NoError(t, notes.Put(ctx, fmt.Sprintf("after-%02d", i), Note{Text: strconv.Itoa(i)}))
			}
			require.NoError(t, rot.Wait(ctx))
			assert.True(t, rot.Progress().Finished)
			_, pending, err := owner.PendingRotation(ctx)
			require.NoError(t, err)
			assert.False(t, pending)

			_, err = vault.Open(ctx, personCfg(st, "bob", "bob-secret"))
			assert.ErrorIs(t, err, vault.ErrNoAccess)

			n := 0
			for it, err := range stores.ListUnder(ctx, st, "v/team/notes/") {
				require.NoError(t, err)
				id := strings.TrimPrefix(it.Key, "v/team/notes/")
				gen, err := crypto.RecordGeneration(it.Value)
				require.NoError(t, err)
				assert.Equal(t, uint64(3), gen, id)
				assert.False(t, opensWith(t, st, "notes", id, bobKeys), "%s opens with a key bob held", id)
				got, err := notes.Get(ctx, id)
				require.NoError(t, err)
				assert.NotEmpty(t, got.Text)
				n++
			}
			assert.Equal(t, 41, n)

			// The ledger: two rotations, the revocation before the second,
			// and one re-sealing entry per record that was re-sealed.
			var kinds []string
			resealed := 0
			for e, err := range owner.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				switch {
				case e.Kind == ledger.KeysRotated:
					kinds = append(kinds, fmt.Sprintf("%s %d %s", e.Kind, e.Number, e.Reason))
				case e.Kind == ledger.PersonRevoked:
					kinds = append(kinds, e.Kind.String()+" "+e.ID)
				case e.Kind == ledger.RecordPut && e.Reason == vault.ResealedReason:
					resealed++
				}
			}
			assert.Equal(t, []string{"keys-rotated 2 rotate", "person-revoked bob", "keys-rotated 3 revoke bob"}, kinds)
			assert.Equal(t, 20+21, resealed, "20 records re-sealed by each rotation, and bob's by the second")
			verified(t, owner)
		})
	}
}

// TestRotateRevokeWithoutRotation: the option leaves the keys alone (the
// revoked person's keys still open new records: what it documents), and
// writes no rotation.
func TestRotateRevokeWithoutRotation(t *testing.T) {
	ctx := context.Background()
	st := newMem(t)
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleWriter))
	hdr, err := st.Get(ctx, "v/team/_header")
	require.NoError(t, err)
	entry, err := st.Get(ctx, "v/team/_keyring/bob")
	require.NoError(t, err)
	bobKeys := heldKeys(t, "team", "bob", "bob-secret", hdr.Value, entry.Value)
	require.NoError(t, owner.Revoke(ctx, "bob", vault.RevokeWithoutRotation()))
	assert.Nil(t, owner.Rotation())
	require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "after", Note{Text: "x"}))
	assert.True(t, opensWith(t, st, "notes", "after", bobKeys))
	_, pending, err := owner.PendingRotation(ctx)
	require.NoError(t, err)
	assert.False(t, pending)
}

// TestRotateRefusals: a writer cannot rotate (ErrNotPermitted) and a
// reader cannot resume; a keyring holding a version 1 entry refuses a
// rotation and a rotating Revoke, writing nothing.
func TestRotateRefusals(t *testing.T) {
	ctx := context.Background()
	st := newMem(t)
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter))
	require.NoError(t, owner.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
	w := openPerson(t, personCfg(st, "wanda", "w"))
	before := snapshot(t, st)
	_, err := w.RotateKeys(ctx)
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	r := openPerson(t, personCfg(st, "rita", "r"))
	_, err = r.ResumeRotation(ctx)
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	assert.Equal(t, before, snapshot(t, st))
}

func newMem(t testing.TB) stores.Store { return memAndBadger()["memstore"](t) }

// TestRotateGrantAfterRotationElsewhere: an owner's handle opened before
// another handle rotated grants a new person, who gets every generation
// (the later one loaded from the owner's keyring entry) and reads a record
// sealed with it.
func TestRotateGrantAfterRotationElsewhere(t *testing.T) {
	ctx := context.Background()
	st := newMem(t)
	stale := openPerson(t, personCfg(st, "olga", "o"))
	other := openPerson(t, personCfg(st, "olga", "o"))
	rot, err := other.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](other, "notes").Put(ctx, "g2", Note{Text: "sealed with generation 2"}))
	require.NoError(t, stale.Grant(ctx, "bob", vault.Secret([]byte("bob-secret")), vault.RoleReader))
	bob := openPerson(t, personCfg(st, "bob", "bob-secret"))
	got, err := vault.CollectionOf[Note](bob, "notes").Get(ctx, "g2")
	require.NoError(t, err)
	assert.Equal(t, "sealed with generation 2", got.Text)
	hdr, err := st.Get(ctx, "v/team/_header")
	require.NoError(t, err)
	entry, err := st.Get(ctx, "v/team/_keyring/bob")
	require.NoError(t, err)
	assert.Len(t, heldKeys(t, "team", "bob", "bob-secret", hdr.Value, entry.Value), 2)
}
