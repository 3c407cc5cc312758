package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestSyncConflictPolicies: the same record changed on two devices since
// they last synced; A syncs first, so B meets the conflict and its
// collection's policy decides. Every case ends converged, with the
// conflict in B's report and a SyncConflict entry naming the loser in B's
// ledger.
func TestSyncConflictPolicies(t *testing.T) {
	type edit func(ctx context.Context, c *vault.Collection[Note]) error
	put := func(text string) edit {
		return func(ctx context.Context, c *vault.Collection[Note]) error { return c.Put(ctx, "x", Note{text}) }
	}
	twice := func(text string) edit {
		return func(ctx context.Context, c *vault.Collection[Note]) error {
			if err := c.Put(ctx, "x", Note{text + "-draft"}); err != nil {
				return err
			}
			return c.Put(ctx, "x", Note{text})
		}
	}
	del := func(ctx context.Context, c *vault.Collection[Note]) error { return c.Delete(ctx, "x") }
	cases := []struct {
		name   string
		policy vault.SyncPolicy
		a, b   edit
		want   map[string]string // the converged notes
		hubWon bool
		// loser is the Reason of B's SyncConflict entry.
		loser string
	}{
		{"higher revision: device ahead", vault.HigherRevisionWins, put("A"), twice("B"), map[string]string{"x": "B@3"}, false, "higher-revision-wins: hub lost"},
		{"higher revision: hub ahead", vault.HigherRevisionWins, twice("A"), put("B"), map[string]string{"x": "A@3"}, true, "higher-revision-wins: device lost"},
		{"higher revision: edit beats delete of the same revision", vault.HigherRevisionWins, del, put("B"), map[string]string{"x": "B@2"}, false, "higher-revision-wins: hub lost"},
		{"higher revision: a delete reaches an unchanged device", vault.HigherRevisionWins, del, nil, map[string]string{}, false, ""},
		{"device wins, tie: resealed above the hub", vault.DeviceWins, put("A"), put("B"), map[string]string{"x": "B@3"}, false, "device-wins: hub lost"},
		{"device wins over a higher revision", vault.DeviceWins, twice("A"), put("B"), map[string]string{"x": "B@4"}, false, "device-wins: hub lost"},
		{"device wins: its delete", vault.DeviceWins, put("A"), del, map[string]string{}, false, "device-wins: hub lost"},
		{"hub wins", vault.HubWins, put("A"), twice("B"), map[string]string{"x": "A@2"}, true, "hub-wins: device lost"},
		{"hub wins: its delete", vault.HubWins, del, put("B"), map[string]string{}, true, "hub-wins: device lost"},
		{"last writer wins", vault.LastWriterWins, twice("A"), put("B"), map[string]string{"x": "B@4"}, false, "last-writer-wins: hub lost"},
		{"first writer wins", vault.FirstWriterWins, put("A"), twice("B"), map[string]string{"x": "A@2"}, true, "first-writer-wins: device lost"},
	}
	for storeName, newStore := range memAndBadger() {
		for _, tc := range cases {
			t.Run(storeName+"/"+tc.name, func(t *testing.T) {
				ctx := context.Background()
				hub, da, db := memstore.New(), newStore(t), newStore(t)
				a, b := syncDevice(t, da, hub), syncDevice(t, db, hub)
				require.NoError(t, b.SetConflictPolicy("notes", tc.policy))
				na, nb := vault.CollectionOf[Note](a, "notes"), vault.CollectionOf[Note](b, "notes")
				require.NoError(t, na.Put(ctx, "x", Note{"base"}))
				mustSync(t, a)
				mustSync(t, b)

				require.NoError(t, tc.a(ctx, na))
				if tc.b != nil {
					require.NoError(t, tc.b(ctx, nb))
				}
				mustSync(t, a)
				rb := mustSync(t, b)
				mustSync(t, a)
				assert.Equal(t, tc.want, assertConverged(t, hub, []stores.Store{da, db}, a, b))

				var reasons []string
				for e, err := range b.Audit().Read(ctx, 1) {
					require.NoError(t, err)
					if e.Kind == ledger.SyncConflict {
						reasons = append(reasons, e.Reason)
					}
				}
				if tc.loser == "" {
					assert.Empty(t, rb.Conflicts)
					assert.Empty(t, reasons)
					return
				}
				require.Len(t, rb.Conflicts, 1)
				c := rb.Conflicts[0]
				assert.Equal(t, "notes/x", c.Collection+"/"+c.ID)
				assert.Equal(t, tc.policy, c.Policy)
				assert.Equal(t, tc.hubWon, c.HubWon)
				assert.Equal(t, []string{tc.loser}, reasons)
			})
		}
	}
}

// TestSetConflictPolicyRejectsBadInput: an unknown policy or a bad
// collection name is refused, and the policy in force stays.
func TestSetConflictPolicyRejectsBadInput(t *testing.T) {
	v := syncDevice(t, memstore.New(), memstore.New())
	assert.ErrorIs(t, v.SetConflictPolicy("notes", vault.SyncPolicy(99)), vault.ErrInvalidArgument)
	assert.ErrorIs(t, v.SetConflictPolicy("_sync", vault.HubWins), vault.ErrReservedName)
	assert.ErrorIs(t, v.SetConflictPolicy("", vault.HubWins), vault.ErrInvalidName)
}
