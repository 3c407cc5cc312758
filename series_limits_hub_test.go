package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestLimitedNumbersThroughHubVerify: bob, limited to notes on a device of
// a hub, numbers a series olga bound to notes from her own device (on the
// hub, where the numbers are taken) and is refused one nobody bound; the
// ledgers of both devices and of the hub verify: what the vault let him
// write, Verify accepts.
func TestLimitedNumbersThroughHubVerify(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	mustSync(t, a)
	require.NoError(t, a.BindSeries(ctx, "notes", "memos"))

	b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	mustSync(t, b)
	bnotes := vault.CollectionOf[Note](b, "notes")
	memos, err := b.Sequence("memos", sequence.Options{})
	require.NoError(t, err)
	n, err := memos.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n)
	_, err = bnotes.PutNumbered(ctx, "memo", memos, func(s sequence.Serial) (Note, error) { return Note{Text: "memo"}, nil })
	require.NoError(t, err)
	inv, err := b.Sequence("invoices", sequence.Options{})
	require.NoError(t, err)
	_, err = inv.Next(ctx)
	require.ErrorIs(t, err, vault.ErrNotPermitted)
	mustSync(t, b)
	mustSync(t, a)

	verified(t, a)
	verified(t, b)
	onHub := openPerson(t, personCfg(hub, "olga", "o"))
	verified(t, onHub)
	// The hub's ledger holds the binding and bob's numbers of it.
	bound, bobs := false, 0
	for e, err := range onHub.Audit().Read(ctx, 1) {
		require.NoError(t, err)
		bound = bound || e.Kind == ledger.SeriesBound && e.Series == "memos" && e.Collection == "notes"
		if e.Actor == "bob" && e.Series == "memos" {
			require.True(t, bound, "bob's entry %d before the binding", e.Seq)
			bobs++
		}
	}
	assert.GreaterOrEqual(t, bobs, 2)
}
