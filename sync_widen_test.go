package noydb_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestSyncCollectionsWidenedPullsOnlyAdded: bob, limited to notes, has
// synced past the memos and payroll records; olga gives him memos (or
// every collection). His next sync pulls the older records of what was
// added, each once, and a later sync pulls nothing again; a reader's
// device as well.
func TestSyncCollectionsWidenedPullsOnlyAdded(t *testing.T) {
	for _, c := range []struct {
		role  vault.Role
		widen []string
	}{{vault.RoleWriter, []string{"notes", "memos"}}, {vault.RoleWriter, nil}, {vault.RoleReader, []string{"notes", "memos"}}} {
		widen := c.widen
		name := c.role.String() + map[bool]string{true: " to all", false: " to notes and memos"}[widen == nil]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, vault.CollectionOf[Note](a, "memos").Put(ctx, "m-1", Note{Text: "memo 1"}))
			require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "pay"}))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), c.role, "notes"))
			require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
			require.NoError(t, vault.CollectionOf[Note](a, "memos").Put(ctx, "m-2", Note{Text: "memo 2"}))
			mustSync(t, a)
			b, err := vault.Open(ctx, hubPerson(devB, hub, "bob", "b"))
			require.NoError(t, err)
			require.Equal(t, 1, mustSync(t, b).Pulled)
			require.NoError(t, b.Close())

			require.NoError(t, a.SetCollections(ctx, "bob", widen...))
			mustSync(t, a)
			b = openPerson(t, hubPerson(devB, hub, "bob", "b"))
			want := map[string]string{"m-1": "memo 1", "m-2": "memo 2"}
			pulled := 2
			if widen == nil {
				pulled = 3
			}
			assert.Equal(t, pulled, mustSync(t, b).Pulled)
			for id, text := range want {
				got, err := vault.CollectionOf[Note](b, "memos").Get(ctx, id)
				if assert.NoError(t, err, id) {
					assert.Equal(t, text, got.Text)
				}
			}
			_, err = vault.CollectionOf[Note](b, "payroll").Get(ctx, "p-1")
			if widen == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, vault.ErrNotPermitted)
			}
			assert.Zero(t, mustSync(t, b).Pulled, "the catch-up is done once")
			verified(t, b)
		})
	}
}

// TestSyncCollectionsWidenedHubRolledBack: the catch-up of added
// collections reads the feed the device applied: a hub rolled back
// behind the device's pull cursor is refused with ErrRollback, as by any
// pull.
func TestSyncCollectionsWidenedHubRolledBack(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "memos").Put(ctx, "m-1", Note{Text: "memo"}))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	mustSync(t, a)
	snap := snapshot(t, hub)
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
	mustSync(t, a)
	b, err := vault.Open(ctx, hubPerson(devB, hub, "bob", "b"))
	require.NoError(t, err)
	mustSync(t, b)
	require.NoError(t, b.Close())

	require.NoError(t, a.SetCollections(ctx, "bob", "notes", "memos"))
	mustSync(t, a)
	// The hub's feed goes back to before the note bob's device pulled;
	// the keyring keeps bob's wider entry.
	for k, v := range snapshot(t, hub) {
		if strings.Contains(k, "/_keyring/") {
			snap[k] = v
		}
	}
	rewindStore(t, hub, snap)
	b = openPerson(t, hubPerson(devB, hub, "bob", "b"))
	_, err = b.Sync(ctx)
	assert.ErrorIs(t, err, vault.ErrRollback)
	_, err = vault.CollectionOf[Note](b, "memos").Get(ctx, "m-1")
	assert.ErrorIs(t, err, vault.ErrNotFound, "nothing pulled from the rolled back hub")
}

// TestSyncCollectionsWidenedInterrupted: the widened sync fails at its
// n-th local commit, for each n it makes; the next sync does the catch-up
// (again) and bob's device ends with both memos, pulled with the same
// text as on the hub.
func TestSyncCollectionsWidenedInterrupted(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("injected")
	for n := 1; ; n++ {
		hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
		a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
		require.NoError(t, vault.CollectionOf[Note](a, "memos").Put(ctx, "m-1", Note{Text: "memo 1"}))
		require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
		require.NoError(t, vault.CollectionOf[Note](a, "memos").Put(ctx, "m-2", Note{Text: "memo 2"}))
		mustSync(t, a)
		var armed atomic.Bool
		updates := 0
		dev := faultstore.New(devB, faultstore.Options{Before: func(op faultstore.Op, _ string) error {
			if op == faultstore.OpUpdate && armed.Load() {
				if updates++; updates == n {
					return boom
				}
			}
			return nil
		}})
		b, err := vault.Open(ctx, hubPerson(dev, hub, "bob", "b"))
		require.NoError(t, err)
		mustSync(t, b)
		require.NoError(t, b.Close())
		require.NoError(t, a.SetCollections(ctx, "bob", "notes", "memos"))
		mustSync(t, a)

		b = openPerson(t, hubPerson(dev, hub, "bob", "b"))
		armed.Store(true)
		_, err = b.Sync(ctx)
		armed.Store(false)
		if err == nil {
			require.Greater(t, n, 1, "no local commit failed")
			return
		}
		require.ErrorIs(t, err, boom, "commit %d", n)
		mustSync(t, b)
		for id, text := range map[string]string{"m-1": "memo 1", "m-2": "memo 2"} {
			got, err := vault.CollectionOf[Note](b, "memos").Get(ctx, id)
			if assert.NoError(t, err, "commit %d failed: %s", n, id) {
				assert.Equal(t, text, got.Text)
			}
		}
		assert.Zero(t, mustSync(t, b).Pulled)
		verified(t, b)
		require.NoError(t, b.Close())
		require.Less(t, n, 50)
	}
}

// TestSyncCollectionsWidenedOpenDevice: as
// TestSyncCollectionsWidenedPullsOnlyAdded, with bob's device handle kept
// open across the widening: its next sync brings his new keyring entry,
// follows it, and pulls the older records of what was added; the handle
// then reads them without a reopen.
func TestSyncCollectionsWidenedOpenDevice(t *testing.T) {
	for name, widen := range map[string][]string{"to notes and memos": {"notes", "memos"}, "to all": nil} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, vault.CollectionOf[Note](a, "memos").Put(ctx, "m-1", Note{Text: "memo 1"}))
			require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "pay"}))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
			require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
			require.Equal(t, 1, mustSync(t, b).Pulled)

			require.NoError(t, a.SetCollections(ctx, "bob", widen...))
			mustSync(t, a)
			pulled := 1
			if widen == nil {
				pulled = 2
			}
			assert.Equal(t, pulled, mustSync(t, b).Pulled)
			got, err := vault.CollectionOf[Note](b, "memos").Get(ctx, "m-1")
			require.NoError(t, err)
			assert.Equal(t, "memo 1", got.Text)
			require.NoError(t, vault.CollectionOf[Note](b, "memos").Put(ctx, "m-2", Note{Text: "bob's"}))
			mustSync(t, b)
			_, err = vault.CollectionOf[Note](b, "payroll").Get(ctx, "p-1")
			if widen == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, vault.ErrNotPermitted)
			}
			assert.Zero(t, mustSync(t, b).Pulled, "the catch-up is done once")
			verified(t, b)
		})
	}
}
