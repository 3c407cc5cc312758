package noydb_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Note is the record type of the sync tests.
type Note struct {
	Text string
}

// syncDevice opens vault "shop" for alice on device, synced through hub.
func syncDevice(t testing.TB, device, hub stores.Store) *vault.Vault {
	t.Helper()
	return openVault(t, openDevice(t, device, hub, "alice", "s3cret"), "shop")
}

// mustSync syncs v and returns the report.
func mustSync(t testing.TB, v *vault.Vault) vault.SyncReport {
	t.Helper()
	rep, err := v.Sync(context.Background())
	require.NoError(t, err)
	return rep
}

// sealedRecords returns the sealed records of the vault "shop" in st: every
// key of a collection (not the SDK's own "_" data) with its value.
func sealedRecords(t testing.TB, st stores.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	for it, err := range st.List(context.Background(), "v/shop/") {
		require.NoError(t, err)
		rest := strings.TrimPrefix(it.Key, "v/shop/")
		if strings.HasPrefix(rest, "_") {
			continue
		}
		out[it.Key] = string(it.Value)
	}
	return out
}

// notes returns the records of collection notes on v: id -> text@revision.
func notes(t testing.TB, v *vault.Vault) map[string]string {
	t.Helper()
	out := map[string]string{}
	for r, err := range vault.CollectionOf[Note](v, "notes").List(context.Background()) {
		require.NoError(t, err)
		out[r.ID] = fmt.Sprintf("%s@%d", r.Value.Text, r.Revision)
	}
	return out
}

// assertConverged checks that every device and the hub hold the same
// sealed records (so the same values at the same revisions) and that
// every device's ledger verifies, and returns the devices' notes.
func assertConverged(t testing.TB, hub stores.Store, devs []stores.Store, vs ...*vault.Vault) map[string]string {
	t.Helper()
	want := sealedRecords(t, hub)
	for i, d := range devs {
		got := sealedRecords(t, d)
		assert.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "device %d keys", i)
		assert.Equal(t, want, got, "device %d bytes", i)
	}
	// The hub is a vault store like any other: opened directly, its ledger
	// (the change feed) verifies and it holds the same notes.
	hv := openVault(t, openDB(t, hub, "alice", "s3cret"), "shop")
	defer func() { _ = hv.Close() }()
	vs = append([]*vault.Vault{hv}, vs...)
	var first map[string]string
	for i, v := range vs {
		rep, err := v.Audit().Verify(context.Background())
		require.NoError(t, err, "device %d ledger", i)
		assert.True(t, rep.OK(), "device %d ledger", i)
		n := notes(t, v)
		if i == 0 {
			first = n
		} else {
			assert.Equal(t, first, n, "device %d notes", i)
		}
	}
	return first
}

// TestSyncTwoDevicesConverge: edits, new records and deletes made on two
// devices reach each other through a hub, on memstore and badger devices.
func TestSyncTwoDevicesConverge(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			twoDevicesConverge(t, memstore.New(), newStore(t), newStore(t))
		})
	}
}

// twoDevicesConverge runs the scenario of TestSyncTwoDevicesConverge on
// devices da and db with hub.
func twoDevicesConverge(t *testing.T, hub, da, db stores.Store) {
	ctx := context.Background()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")

	require.NoError(t, na.Put(ctx, "a1", Note{"apple"}))
	require.NoError(t, na.Put(ctx, "a2", Note{"apricot"}))
	require.NoError(t, nb.Put(ctx, "b1", Note{"banana"}))

	assert.Equal(t, vault.SyncReport{Pushed: 2}, mustSync(t, a))
	assert.Equal(t, vault.SyncReport{Pulled: 2, Pushed: 1}, mustSync(t, b))
	assert.Equal(t, vault.SyncReport{Pulled: 1}, mustSync(t, a))
	assert.Equal(t, map[string]string{"a1": "apple@1", "a2": "apricot@1", "b1": "banana@1"},
		assertConverged(t, hub, []stores.Store{da, db}, a, b))

	// An edit on A, a delete on B, a second edit on B.
	require.NoError(t, na.Put(ctx, "a1", Note{"avocado"}))
	require.NoError(t, nb.Delete(ctx, "b1"))
	require.NoError(t, nb.Put(ctx, "a2", Note{"almond"}))
	assert.Equal(t, vault.SyncReport{Pushed: 1}, mustSync(t, a))
	assert.Equal(t, vault.SyncReport{Pulled: 1, Pushed: 2}, mustSync(t, b))
	assert.Equal(t, vault.SyncReport{Pulled: 2}, mustSync(t, a))
	assert.Equal(t, map[string]string{"a1": "avocado@2", "a2": "almond@2"},
		assertConverged(t, hub, []stores.Store{da, db}, a, b))

	// Nothing changed: nothing to do.
	assert.Equal(t, vault.SyncReport{}, mustSync(t, a))
	assert.Equal(t, vault.SyncReport{}, mustSync(t, b))

	// The hub holds none of the texts, in any key or value.
	for k, val := range snapshot(t, hub) {
		for _, text := range []string{"apple", "apricot", "banana", "avocado", "almond"} {
			assert.False(t, strings.Contains(k, text) || strings.Contains(val, text), "plaintext %q on the hub at %s", text, k)
		}
	}

	// Every pulled change is in the device's ledger with its hub position.
	var pulled []string
	for e, err := range a.Audit().Read(ctx, 1) {
		require.NoError(t, err)
		if e.Kind == ledger.RecordPulled || e.Kind == ledger.RecordPulledDelete {
			pulled = append(pulled, fmt.Sprintf("%s %s/%s@%d hub#%d", e.Kind, e.Collection, e.ID, e.Revision, e.Number))
		}
	}
	assert.Equal(t, []string{
		"record-pulled notes/b1@1 hub#3",
		"record-pulled-delete notes/b1@1 hub#5",
		"record-pulled notes/a2@2 hub#6",
	}, pulled)
}

// TestSyncWithoutHub: a vault opened without a hub has nothing to sync.
func TestSyncWithoutHub(t *testing.T) {
	v := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "shop")
	_, err := v.Sync(context.Background())
	assert.ErrorIs(t, err, vault.ErrNoHub)
}

// TestSyncEveryRejectsBadInput: a vault without a hub, or a period that is
// not positive, starts nothing.
func TestSyncEveryRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "alice", "s3cret"), "shop")
	_, err := v.SyncEvery(ctx, time.Minute)
	assert.ErrorIs(t, err, vault.ErrNoHub)
	d := syncDevice(t, memstore.New(), memstore.New())
	_, err = d.SyncEvery(ctx, 0)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
}

// TestSyncerSyncNowAndStop: SyncNow runs a sync through the Syncer and
// its status shows it; after Stop, SyncNow gives ErrClosed.
func TestSyncerSyncNowAndStop(t *testing.T) {
	ctx := context.Background()
	hub, da, db := memstore.New(), memstore.New(), memstore.New()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n", Note{"nectarine"}))
	s, err := a.SyncEvery(ctx, time.Hour)
	require.NoError(t, err)
	_, err = s.SyncNow(ctx)
	require.NoError(t, err)
	st := s.Status()
	assert.NoError(t, st.LastError)
	assert.False(t, st.Running)
	assert.GreaterOrEqual(t, st.Syncs, 1)
	s.Stop()
	s.Stop()
	assert.True(t, s.Status().Stopped)
	_, err = s.SyncNow(ctx)
	assert.ErrorIs(t, err, vault.ErrClosed)
	mustSync(t, b)
	assert.Equal(t, map[string]string{"n": "nectarine@1"}, assertConverged(t, hub, []stores.Store{da, db}, a, b))
}

// TestSyncWhileWriting: a device keeps writing while it syncs again and
// again; after the writers stop, syncs converge, and every write is there.
func TestSyncWhileWriting(t *testing.T) {
	ctx := context.Background()
	hub, da, db := memstore.New(), memstore.New(), memstore.New()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	na := vault.CollectionOf[Note](a, "notes")
	done := make(chan error, 1)
	go func() {
		for i := range 200 {
			if err := na.Put(ctx, fmt.Sprintf("w%d", i%50), Note{fmt.Sprintf("v%d", i)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	syncing := true
	for syncing {
		select {
		case err := <-done:
			require.NoError(t, err)
			syncing = false
		default:
		}
		mustSync(t, a)
		mustSync(t, b)
	}
	mustSync(t, a)
	mustSync(t, b)
	got := assertConverged(t, hub, []stores.Store{da, db}, a, b)
	require.Len(t, got, 50)
	for i := 150; i < 200; i++ {
		assert.Equal(t, fmt.Sprintf("v%d@4", i), got[fmt.Sprintf("w%d", i%50)])
	}
}

// TestSyncCarriesKeyringEntries: a person granted on one device's store
// after the vault was opened reaches the hub at that device's next sync
// and the other device at its own, byte for byte.
func TestSyncCarriesKeyringEntries(t *testing.T) {
	ctx := context.Background()
	hub, da, db := memstore.New(), memstore.New(), memstore.New()
	a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	slot, err := da.Get(ctx, "v/shop/_keyring/bob")
	require.NoError(t, err)
	_, err = hub.Get(ctx, "v/shop/_keyring/bob")
	require.ErrorIs(t, err, stores.ErrNotFound)

	mustSync(t, a)
	got, err := hub.Get(ctx, "v/shop/_keyring/bob")
	require.NoError(t, err)
	assert.Equal(t, slot.Value, got.Value)
	mustSync(t, b)
	got, err = db.Get(ctx, "v/shop/_keyring/bob")
	require.NoError(t, err)
	assert.Equal(t, slot.Value, got.Value)
}

// TestSyncerStopsWhenTheVaultCloses: a Syncer whose vault is closed stops
// by itself after its next sync, which fails with ErrClosed.
func TestSyncerStopsWhenTheVaultCloses(t *testing.T) {
	ctx := context.Background()
	a := syncDevice(t, memstore.New(), memstore.New())
	s, err := a.SyncEvery(ctx, time.Hour)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	_, err = s.SyncNow(ctx)
	assert.ErrorIs(t, err, vault.ErrClosed)
	<-s.Done()
	st := s.Status()
	assert.True(t, st.Stopped)
	s.Stop()
}

// TestSyncDevicesAtOnce: three devices sync with one hub at the same time
// (their pushes race on the hub's records and feed), on overlapping ids;
// then syncs one after the other converge.
func TestSyncDevicesAtOnce(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	devs := []stores.Store{memstore.New(), memstore.New(), memstore.New()}
	var vs []*vault.Vault
	ids := map[string]bool{}
	for i, d := range devs {
		v := syncDevice(t, d, hub)
		vs = append(vs, v)
		c := vault.CollectionOf[Note](v, "notes")
		for j := range 30 {
			id := fmt.Sprintf("n%d", (j*(i+1))%40)
			ids[id] = true
			require.NoError(t, c.Put(ctx, id, Note{fmt.Sprintf("d%d-%d", i, j)}))
		}
	}
	for range 2 {
		errs := make(chan error, len(vs))
		for _, v := range vs {
			go func() {
				_, err := v.Sync(ctx)
				errs <- err
			}()
		}
		for range vs {
			require.NoError(t, <-errs)
		}
	}
	for range 2 {
		for _, v := range vs {
			mustSync(t, v)
		}
	}
	got := assertConverged(t, hub, devs, vs...)
	assert.Equal(t, slices.Sorted(maps.Keys(ids)), slices.Sorted(maps.Keys(got)))
}
