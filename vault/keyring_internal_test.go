package vault

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestKeyringCostRaisedByStore: a store that raises the key-derivation
// cost in a keyring entry (to make opening hang or exhaust memory) is
// refused before any derivation, whatever the MAC says: the cost is
// checked against the opener's ceiling first.
func TestKeyringCostRaisedByStore(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	cfg := Config{Store: st, Name: "team", User: "olga", Secret: []byte("o"), KDF: cheap, InsecureAllowWeakKDF: true}
	v, err := Open(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, v.Grant(ctx, "rita", Secret([]byte("r")), RoleReader))
	require.NoError(t, v.Close())

	for _, raised := range []crypto.KDFParams{
		{Time: 1, MemoryKiB: 4 << 20, Threads: 1},
		{Time: 1 << 30, MemoryKiB: 64, Threads: 1},
		{Time: 1, MemoryKiB: 4096, Threads: 255},
	} {
		it, err := st.Get(ctx, "v/team/_keyring/rita")
		require.NoError(t, err)
		e, err := decodeKeyring(it.Value)
		require.NoError(t, err)
		e.kdf = raised
		_, err = st.Put(ctx, "v/team/_keyring/rita", e.encode())
		require.NoError(t, err)
		rcfg := cfg
		rcfg.User, rcfg.Secret = "rita", []byte("r")
		_, err = Open(ctx, rcfg)
		assert.ErrorIs(t, err, ErrWeakKDF, "%+v", raised)
		assert.ErrorIs(t, err, crypto.ErrKDFTooCostly, "%+v", raised)
	}
}
