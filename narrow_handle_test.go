package noydb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestCollectionsNarrowedOpenHandle: bob, a writer of notes and payroll,
// keeps a handle open while olga narrows him to notes. What the old
// handle still writes into payroll, Verify refuses at its position with
// OutsideCollections (the narrowing's grant entry comes before it).
func TestCollectionsNarrowedOpenHandle(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
	bob := openPerson(t, personCfg(st, "bob", "b"))
	require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-1", Note{Text: "before"}))
	verified(t, owner)

	require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
	verified(t, owner)
	// The handle holds the keys it opened with, and writes.
	require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-2", Note{Text: "after"}))
	head, err := owner.Audit().Head(ctx)
	require.NoError(t, err)
	_, err = owner.Audit().Verify(ctx)
	var se *ledger.SignatureError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, ledger.SignatureError{Seq: head.Seq, Actor: "bob", Problem: ledger.OutsideCollections}, *se)
}
