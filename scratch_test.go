package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

func TestScratch(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
	require.NoError(t, a.Close())
	a = openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Revoke(ctx, "guest"))
	require.NoError(t, a.Grant(ctx, "guest", vault.Secret([]byte("g")), vault.RoleWriter))
	g := openPerson(t, hubPerson(devA, hub, "guest", "g"))
	q, err := g.Sequence("tick", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	mustSync(t, b)
	mustSync(t, a)
	mustSync(t, b)
	verified(t, a)
	verified(t, b)
}
