package vault

import (
	"context"
	"testing"

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
