package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

func openDeviceVault(t *testing.T, device, hub stores.Store) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), vault.Config{
		Store: device, Hub: hub, Name: "books", User: "u", Secret: []byte("s"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// TestSyncProgressBar: on a terminal, a sync shows a bar per phase that
// lasts, counting changes up to the phase's total, and erases it.
func TestSyncProgressBar(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	a := openDeviceVault(t, memstore.New(), hub)
	b := openDeviceVault(t, memstore.New(), hub)
	const n = 30
	for i := range n {
		require.NoError(t, records(a, "customers").Put(ctx, fmt.Sprintf("c%02d", i), []byte(`{}`)))
	}
	// Every reading of the clock is a second later: every step draws.
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	var bars bytes.Buffer
	cli := &app{io: stdio{err: &bars, errTerminal: true}, clock: clock}

	_, err := a.SyncWith(ctx, vault.SyncOptions{Progress: cli.syncProgress()})
	require.NoError(t, err)
	cli.endSyncProgress()
	assert.Contains(t, bars.String(), "\rpush [==============================] 100%  30/30 changes")
	assert.NotContains(t, bars.String(), "pull [", "the hub's feed was empty")
	assert.True(t, strings.HasSuffix(bars.String(), "\r"), "the bar is erased")

	bars.Reset()
	rep, err := b.SyncWith(ctx, vault.SyncOptions{Progress: cli.syncProgress()})
	require.NoError(t, err)
	cli.endSyncProgress()
	assert.Equal(t, n, rep.Pulled)
	assert.Contains(t, bars.String(), "\rpull [==============================] 100%  30/30 changes")
	assert.True(t, strings.HasSuffix(bars.String(), "\r"), "the bar is erased")

	// Off a terminal: no callback at all.
	off := &app{io: stdio{err: &bars}}
	assert.Nil(t, off.syncProgress())
}

// TestParsePolicies: --policy values, good and bad.
func TestParsePolicies(t *testing.T) {
	got, err := parsePolicies([]string{"invoices=manual", "customers=hub-wins", "invoices=device-wins"})
	require.NoError(t, err)
	assert.Equal(t, map[string]vault.SyncPolicy{"invoices": vault.DeviceWins, "customers": vault.HubWins}, got)
	for _, bad := range []string{"invoices", "=manual", "invoices=merge", "invoices=", "in/voices=manual"} {
		_, err := parsePolicies([]string{bad})
		assert.True(t, isUsage(err), "%q: %v", bad, err)
	}
}

// TestUnreachableHub: the stand-in for a hub that cannot be reached fails
// every call as unreachable, which the vault takes for offline.
func TestUnreachableHub(t *testing.T) {
	ctx := context.Background()
	u := unreachableHub{err: fmt.Errorf("hub x: %w", stores.ErrUnavailable)}
	_, err := u.Get(ctx, "k")
	assert.ErrorIs(t, err, stores.ErrUnavailable)
	assert.True(t, vault.Unreachable(err))
	_, err = u.CompareAndSwap(ctx, "k", 0, nil)
	assert.ErrorIs(t, err, stores.ErrUnavailable)
	assert.ErrorIs(t, u.Update(ctx, func(stores.Tx) error { return nil }), stores.ErrUnavailable)
	for _, err := range u.List(ctx, "") {
		assert.ErrorIs(t, err, stores.ErrUnavailable)
	}
	_, err = u.TryLock(ctx, "l")
	assert.ErrorIs(t, err, stores.ErrUnavailable)
	assert.True(t, u.Capabilities().CASAtomic)
}

// TestSyncReportPrinted: every outcome of a conflict, and a rejection with
// its reason, in the text report and in --json.
func TestSyncReportPrinted(t *testing.T) {
	rep := vault.SyncReport{Pulled: 3, Pushed: 1,
		Conflicts: []vault.SyncConflict{
			{Collection: "c", ID: "a", Policy: vault.HigherRevisionWins, HubWon: true, DeviceRevision: 2, HubRevision: 3},
			{Collection: "c", ID: "b", Policy: vault.DeviceWins, DeviceRevision: 4, HubRevision: 2, HubDeleted: true},
			{Collection: "c", ID: "d", Policy: vault.Manual, Kept: true, DeviceRevision: 2, HubRevision: 2},
			{Collection: "c", ID: "e", Policy: vault.Merge, Merged: true, DeviceRevision: 2, HubRevision: 2},
		},
		Rejected: []vault.SyncRejected{{Collection: "c", ID: "f", Reason: "the device's record does not open"}},
	}
	var out bytes.Buffer
	a := &app{io: stdio{out: &out}, hub: &hubState{spec: storeSpec{kind: "badger", dir: "hub"}}}
	a.printReport("books", rep)
	assert.Equal(t, `synced vault books with hub badger:hub: pulled 3, pushed 1, 4 conflicts, 1 rejected
conflict c/a: the hub's side won (higher-revision-wins; this device: revision 2, hub: revision 3)
conflict c/b: this device's side won (device-wins; this device: revision 4, hub: deleted (after revision 2))
conflict c/d: kept for you to resolve (manual; this device: revision 2, hub: revision 2): see 'noydb sync conflicts'
conflict c/e: merged (merge; this device: revision 2, hub: revision 2)
rejected c/f: the device's record does not open
`, out.String())

	j := reportJSON("books", "badger:hub", rep)
	var outcomes []string
	for _, c := range j.Conflicts {
		outcomes = append(outcomes, c.Outcome)
	}
	assert.Equal(t, []string{"hub", "device", "kept", "merged"}, outcomes)
	assert.True(t, j.Conflicts[1].HubDeleted)
	assert.Equal(t, []syncRejectedJSON{{"c", "f", "the device's record does not open"}}, j.Rejected)
	empty := reportJSON("books", "badger:hub", vault.SyncReport{})
	assert.NotNil(t, empty.Conflicts, "an empty list, not null")
	assert.NotNil(t, empty.Rejected, "an empty list, not null")
}
