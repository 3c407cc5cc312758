package vault

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestMergeKeyring: bob's entry changed two ways from one value (a
// rotation; a secret change, then another) merges into one entry with the
// later lock and every generation, in either order, to the same bytes; an
// entry that supersedes the other, a forged one, another person's and a
// revoked one are not merged.
func TestMergeKeyring(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	kdf := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	cfg := Config{Store: st, Name: "team", User: "olga", Secret: []byte("o"), KDF: kdf, InsecureAllowWeakKDF: true}
	olga, err := Open(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = olga.Close() })
	require.NoError(t, olga.Grant(ctx, "bob", Secret([]byte("b")), RoleWriter))
	const key = "v/team/_keyring/bob"
	get := func() []byte {
		it, err := st.Get(ctx, key)
		require.NoError(t, err)
		return it.Value
	}
	put := func(b []byte) {
		_, err := st.Put(ctx, key, b)
		require.NoError(t, err)
	}
	base := get()
	rot, err := olga.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	rotated := get()

	put(base) // bob's device did not see the rotation
	bcfg := cfg
	bcfg.User, bcfg.Secret = "bob", []byte("b")
	bob, err := Open(ctx, bcfg)
	require.NoError(t, err)
	require.NoError(t, bob.ChangeSecret(ctx, []byte("b"), []byte("b2")))
	changed := get()
	require.NoError(t, bob.ChangeSecret(ctx, []byte("b2"), []byte("b3")))
	changedTwice := get()
	require.NoError(t, bob.Close())

	dk, header := olga.dk, olga.me.header
	merge := func(a, b []byte) []byte { return mergeKeyring(dk, "team", header, a, b) }
	decode := func(b []byte) *keyringEntry {
		e, err := decodeKeyring(b)
		require.NoError(t, err)
		return e
	}
	gens := func(e *keyringEntry) []uint64 {
		var out []uint64
		for _, g := range e.gens {
			out = append(out, g.gen)
		}
		return out
	}
	s := decode(base).serial
	require.Equal(t, s+1, decode(rotated).serial)
	require.Equal(t, s+1, decode(changed).serial)

	for name, c := range map[string]struct {
		lock   []byte
		serial uint64
	}{"changed": {changed, s + 2}, "changedTwice": {changedTwice, s + 3}} {
		m := merge(rotated, c.lock)
		require.NotNil(t, m, name)
		assert.Equal(t, m, merge(c.lock, rotated), "%s: the same bytes in either order", name)
		e := decode(m)
		assert.Equal(t, c.serial, e.serial, name)
		assert.Equal(t, []uint64{1, 2}, gens(e), name)
		locked := decode(c.lock)
		assert.Equal(t, locked.salt, e.salt, name)
		assert.Equal(t, locked.boxPriv, e.boxPriv, name)
		require.NoError(t, e.verify(dk, "team", "bob", header), name)
		assert.Nil(t, merge(m, rotated), "%s: the merge supersedes both", name)
		assert.Nil(t, merge(rotated, m), name)
		assert.Nil(t, merge(m, c.lock), name)
		assert.False(t, keyringNewer(rotated, m), name)
		assert.False(t, keyringNewer(c.lock, m), name)
	}
	// The merged entry opens with the new secret and holds generation 2
	// (the latest change's: the ledger gives bob the signing key of his
	// last renewal only).
	put(merge(rotated, changedTwice))
	bcfg.Secret = []byte("b3")
	bob, err = Open(ctx, bcfg)
	require.NoError(t, err)
	_, err = bob.keys.get(2, nil)
	require.NoError(t, err)
	require.NoError(t, bob.Close())

	assert.Nil(t, merge(changedTwice, changed), "a later secret change supersedes an earlier one")
	assert.Nil(t, merge(rotated, rotated))
	forged := decode(changed)
	forged.salt = make([]byte, len(forged.salt)) // the MAC no longer holds
	assert.Nil(t, merge(rotated, forged.encode()), "a forged entry is never merged")
	assert.Nil(t, merge(forged.encode(), rotated))
	it, err := st.Get(ctx, "v/team/_keyring/olga")
	require.NoError(t, err)
	assert.Nil(t, merge(it.Value, changed), "another person's entry")
	require.NoError(t, olga.Revoke(ctx, "bob"))
	assert.Nil(t, merge(get(), changed), "a revoked entry")
	assert.Nil(t, merge(changed, get()))
}
