package vault

import (
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestPeopleChecksReachTheLedger: the ledger a vault opens with, under
// whatever wraps it, replays its people and reads verified: without,
// peopleState would replay nothing and a pull would check no author.
func TestPeopleChecksReachTheLedger(t *testing.T) {
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	v, err := Open(context.Background(), Config{Store: memstore.New(), Name: "v", User: "olga", Secret: []byte("o"),
		KDF: cheap, InsecureAllowWeakKDF: true})
	require.NoError(t, err)
	defer v.Close()
	_, ok := ledgerBelow(v.ledger).(ledger.PeopleReplayer)
	require.True(t, ok, "people replay")
	_, ok = ledgerBelow(v.ledger).(ledger.VerifiedReader)
	require.True(t, ok, "verified read")
	require.NoError(t, v.Grant(context.Background(), "will", Secret([]byte("w")), RoleWriter))
	st, err := v.peopleState(context.Background())
	require.NoError(t, err)
	w, ok := st.Person("will")
	require.True(t, ok, "%v", st)
	require.Equal(t, "writer", w.Role)
}

// TestClosedVaultKeepsNoStore: the replay of a ledger's people is shared
// in the process by store, but the share does not keep the store: once
// every vault on it is closed and the program drops it, the store is
// collected (a process opening many stores, each with its data, does not
// keep them), and the replay kept for it does not outgrow its bound.
func TestClosedVaultKeepsNoStore(t *testing.T) {
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	var kept []weak.Pointer[memstore.Store]
	for i := range 4 {
		st, hub := memstore.New(), memstore.New()
		kept = append(kept, weak.Make(st), weak.Make(hub))
		cfg := Config{Store: st, Name: "v", User: "olga", Secret: []byte("o"), KDF: cheap, InsecureAllowWeakKDF: true}
		if i%2 == 1 {
			cfg.Hub = hub // a device of a hub: the replay is the hub's ledger's
		}
		v, err := Open(context.Background(), cfg)
		require.NoError(t, err)
		require.NoError(t, v.Grant(context.Background(), "will", Secret([]byte("w")), RoleWriter))
		if cfg.Hub != nil {
			_, err := v.Sync(context.Background())
			require.NoError(t, err)
			// A second device gets the vault from the hub: its checks of
			// the hub's people replay the hub's ledger.
			other := memstore.New()
			kept = append(kept, weak.Make(other))
			cfg.Store = other
			w, err := Open(context.Background(), cfg)
			require.NoError(t, err)
			_, err = w.Sync(context.Background())
			require.NoError(t, err)
			require.NoError(t, w.Close())
		}
		require.NoError(t, v.Close())
	}
	runtime.GC()
	runtime.GC() // the pools' victim caches go at the second
	for i, p := range kept {
		require.True(t, p.Value() == nil, "store %d outlives its closed vault", i)
	}
}
