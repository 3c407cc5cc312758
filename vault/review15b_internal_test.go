package vault

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestReview15bLimitedWriterForgesOtherCollection: bob, a writer limited
// to "notes", runs a client of his own: it forgets his limit and seals
// with the first generation's data key he holds (what this package does
// for a person without limit who knows generation 1 only). He writes a
// payroll record and appends the ledger entry, signed with his own key,
// ignoring the store's current generation (which an honest handle reads
// in every commit and which would make it re-seal with generation 2),
// as any write does. The owner's read refuses it (ErrTampered): the
// limited grant's rotation re-sealed every record with generation 2 and
// recorded it (ledger.KeysResealed), so a record sealed by generation 1
// since is not one the vault wrote (the generation floor); Verify reports
// bob's entry on a collection he may not use, at its position.
func TestReview15bLimitedWriterForgesOtherCollection(t *testing.T) {
	ctx := context.Background()
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	st := memstore.New()
	cfg := Config{Store: st, Name: "team", User: "olga", Secret: []byte("o"), KDF: cheap, InsecureAllowWeakKDF: true}
	owner, err := Open(ctx, cfg)
	require.NoError(t, err)
	defer owner.Close()
	require.NoError(t, CollectionOf[map[string]string](owner, "payroll").Put(ctx, "p-1", map[string]string{"pay": "1"}))
	require.NoError(t, owner.Grant(ctx, "bob", Secret([]byte("b")), RoleWriter, "notes"))
	rep, err := owner.Audit().Verify(ctx)
	require.NoError(t, err)
	require.NoError(t, rep.Problem)

	bcfg := cfg
	bcfg.User, bcfg.Secret = "bob", []byte("b")
	bob, err := Open(ctx, bcfg)
	require.NoError(t, err)
	defer bob.Close()
	// bob's own client: no limit, generation 1 only.
	dk1 := bob.keys.snap.Load().keys[1]
	require.NotNil(t, dk1)
	bob.keys.limited.Store(nil)
	bob.keys.snap.Store(&genSnap{cur: 1, keys: map[uint64]*crypto.Key{1: dk1}})
	// His client also ignores the store's current generation (rotate_current.go):
	// it takes the stored value to say generation 1.
	marker, err := st.Get(ctx, bob.prefix+currentGenKey)
	require.NoError(t, err)
	bob.curGen.Store(&currentGen{sealed: marker.Value, gen: 1})
	require.NoError(t, CollectionOf[map[string]string](bob, "payroll").Put(ctx, "p-2", map[string]string{"pay": "1000000"}))

	_, err = CollectionOf[map[string]string](owner, "payroll").Get(ctx, "p-2")
	require.ErrorIs(t, err, ErrTampered, "the owner reads bob's payroll record")
	head, err := owner.Audit().Head(ctx)
	require.NoError(t, err)
	rep, err = owner.Audit().Verify(ctx)
	var se *ledger.SignatureError
	require.ErrorAs(t, err, &se, "a limited writer's entry on a collection not theirs passes Verify")
	assert.Equal(t, ledger.SignatureError{Seq: head.Seq, Actor: "bob", Problem: ledger.OutsideCollections}, *se)
	assert.ErrorIs(t, err, ledger.ErrBadSignature)
	assert.Equal(t, err, rep.Problem)
	assert.Equal(t, head.Seq, rep.FirstBad)
}
