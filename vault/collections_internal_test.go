package vault

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestCollectionsForgedEntryGetsNoKey: bob, limited to "notes", holds the
// first generation's key, which keys the keyring MAC. With the raw store
// he lifts his own limit (or adds a made-up person whose box key is his)
// and re-MACs the entry: People reports it (ErrTampered, its grant
// signature fails), SetCollections refuses it, and an owner's rotation
// skips it instead of wrapping the new data key for him.
func TestCollectionsForgedEntryGetsNoKey(t *testing.T) {
	ctx := context.Background()
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	for _, forge := range []string{"lift limit", "made-up person"} {
		t.Run(forge, func(t *testing.T) {
			st := memstore.New()
			cfg := Config{Store: st, Name: "team", User: "olga", Secret: []byte("o"), KDF: cheap, InsecureAllowWeakKDF: true}
			owner, err := Open(ctx, cfg)
			require.NoError(t, err)
			defer owner.Close()
			require.NoError(t, owner.Grant(ctx, "bob", Secret([]byte("b")), RoleWriter, "notes"))
			bcfg := cfg
			bcfg.User, bcfg.Secret = "bob", []byte("b")
			bob, err := Open(ctx, bcfg)
			require.NoError(t, err)
			defer bob.Close()

			it, err := st.Get(ctx, "v/team/_keyring/bob")
			require.NoError(t, err)
			e, err := decodeKeyring(it.Value)
			require.NoError(t, err)
			key := "v/team/_keyring/bob"
			switch forge {
			case "lift limit":
				e.collections, e.colKeys = nil, nil
			case "made-up person":
				e.user, e.collections, e.colKeys, e.grantedBy = "mallory", nil, nil, "olga"
				key = "v/team/_keyring/mallory"
			}
			e.serial++
			e.seal(bob.dk, "team", bob.me.header) // bob holds generation 1
			_, err = st.Put(ctx, key, e.encode())
			require.NoError(t, err)
			_, err = owner.People(ctx)
			require.ErrorIs(t, err, ErrTampered, "a MAC every person can compute is not a grant")

			if forge == "lift limit" {
				before := snapshotInternal(t, st)
				assert.ErrorIs(t, owner.SetCollections(ctx, "bob", "notes", "memos"), ErrTampered)
				assert.Equal(t, before, snapshotInternal(t, st), "nothing written")
			}
			forged := snapshotInternal(t, st)[key]
			rot, err := owner.RotateKeys(ctx)
			require.NoError(t, err, "a forged entry does not stop a rotation")
			assert.Equal(t, []string{e.user}, rot.Skipped())
			assert.Equal(t, forged, snapshotInternal(t, st)[key], "the forged entry got no key")
		})
	}
}

// snapshotInternal returns every key and value of a memstore.
func snapshotInternal(t *testing.T, st *memstore.Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	for it, err := range st.List(context.Background(), "") {
		require.NoError(t, err)
		m[it.Key] = string(it.Value)
	}
	return m
}
