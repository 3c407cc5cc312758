package vault_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

func openSyncDevice(t *testing.T, device, hub stores.Store) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), vault.Config{
		Store: device, Hub: hub, Name: "books", User: "firm", Secret: []byte("firm-secret-2026"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// TestSyncProgress: SyncWith reports each phase from 0 to its end, never
// going back and never past its total.
func TestSyncProgress(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	a := openSyncDevice(t, memstore.New(), hub)
	b := openSyncDevice(t, memstore.New(), hub)
	const n = 40
	for i := range n {
		require.NoError(t, vault.CollectionOf[Customer](a, "customers").Put(ctx, fmt.Sprintf("c%02d", i), Customer{Name: "x"}))
	}
	record := func(v *vault.Vault) (map[vault.SyncPhase][]vault.SyncProgress, vault.SyncReport) {
		got := map[vault.SyncPhase][]vault.SyncProgress{}
		rep, err := v.SyncWith(ctx, vault.SyncOptions{Progress: func(p vault.SyncProgress) {
			got[p.Phase] = append(got[p.Phase], p)
		}})
		require.NoError(t, err)
		return got, rep
	}
	check := func(ps []vault.SyncProgress, total uint64) {
		t.Helper()
		require.NotEmpty(t, ps)
		assert.Equal(t, uint64(0), ps[0].Done)
		for i, p := range ps {
			assert.LessOrEqual(t, p.Done, p.Total)
			if i > 0 {
				assert.GreaterOrEqual(t, p.Done, ps[i-1].Done)
			}
		}
		last := ps[len(ps)-1]
		assert.Equal(t, vault.SyncProgress{Phase: last.Phase, Done: total, Total: total}, last)
	}
	got, rep := record(a)
	assert.Equal(t, n, rep.Pushed)
	assert.Empty(t, got[vault.SyncPulling], "the hub's feed was empty")
	check(got[vault.SyncPushing], n) // one ledger entry per put

	got, rep = record(b)
	assert.Equal(t, n, rep.Pulled)
	check(got[vault.SyncPulling], n)
	// b's pull moved its push cursor past the entries of what it pulled:
	// its push has nothing to read.
	assert.Equal(t, 0, rep.Pushed)
	assert.Empty(t, got[vault.SyncPushing])
	assert.Equal(t, "pull", vault.SyncPulling.String())
	assert.Equal(t, "push", vault.SyncPushing.String())
}

// TestSyncState: what a device knows of its syncs, offline included.
func TestSyncState(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	a := openSyncDevice(t, memstore.New(), hub)
	b := openSyncDevice(t, memstore.New(), hub)
	ca, cb := vault.CollectionOf[Customer](a, "customers"), vault.CollectionOf[Customer](b, "customers")
	require.NoError(t, b.SetConflictPolicy("customers", vault.Manual))

	st, err := a.SyncState(ctx)
	require.NoError(t, err)
	assert.Equal(t, vault.SyncState{}, st, "a new vault has nothing to push")

	require.NoError(t, ca.Put(ctx, "acme", Customer{Name: "ACME"}))
	require.NoError(t, ca.Put(ctx, "acme", Customer{Name: "ACME S.p.A."}))
	require.NoError(t, ca.Put(ctx, "bolt", Customer{Name: "Bolt"}))
	st, err = a.SyncState(ctx)
	require.NoError(t, err)
	assert.Equal(t, vault.SyncState{LedgerHead: 3, Pending: 2}, st, "two records changed, three ledger entries")

	_, err = a.Sync(ctx)
	require.NoError(t, err)
	st, err = a.SyncState(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), st.PushedThrough)
	assert.Equal(t, 0, st.Pending)

	// b edits acme offline while a edits it too: b keeps a conflict.
	_, err = b.Sync(ctx)
	require.NoError(t, err)
	require.NoError(t, cb.Put(ctx, "acme", Customer{Name: "ACME (b)"}))
	require.NoError(t, cb.Put(ctx, "cargo", Customer{Name: "Cargo"}))
	require.NoError(t, ca.Put(ctx, "acme", Customer{Name: "ACME (a)"}))
	_, err = a.Sync(ctx)
	require.NoError(t, err)
	rep, err := b.Sync(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Conflicts, 1)
	require.True(t, rep.Conflicts[0].Kept)
	st, err = b.SyncState(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Conflicts)
	assert.Equal(t, 0, st.Pending, "cargo was pushed; acme is held by its conflict")
	hubHead := st.PulledThrough
	assert.NotZero(t, hubHead)

	// Resolving makes acme pending again.
	require.NoError(t, cb.Resolve(ctx, "acme", &Customer{Name: "ACME (both)"}))
	st, err = b.SyncState(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, st.Conflicts)
	assert.Equal(t, 1, st.Pending)
}

// A device tells what it has not pushed yet, without its hub.
func ExampleVault_SyncState() {
	ctx := context.Background()
	v, err := vault.Open(ctx, vault.Config{
		Store: memstore.New(), Hub: memstore.New(), Name: "books", User: "firm", Secret: []byte("firm-secret-2026"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	if err := vault.CollectionOf[Customer](v, "customers").Put(ctx, "acme", Customer{Name: "ACME S.p.A."}); err != nil {
		log.Fatal(err)
	}
	before, err := v.SyncState(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := v.Sync(ctx); err != nil {
		log.Fatal(err)
	}
	after, err := v.SyncState(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending before:", before.Pending, "after:", after.Pending)
	// Output:
	// pending before: 1 after: 0
}
