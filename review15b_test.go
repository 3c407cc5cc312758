package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReview15bStaleHandleSealsForLimitedPerson: a second handle of the
// owner, open before bob was limited to "notes", writes a new payroll
// record after the grant returned. The grant promises that bob cannot
// open a record of another collection even with the raw store and every
// key his entry holds; the stale handle must not seal it with the first
// generation's data key, which bob holds.
func TestReview15bStaleHandleSealsForLimitedPerson(t *testing.T) {
	t.Skip("known bug (review15b #1): a handle that has not learned the generation a limited grant made " +
		"(genKeys.sealKey: current generation 1, no limit) seals new records with the first generation's data key, " +
		"which the limited person holds; the grant's re-seal has finished, nothing re-seals them. " +
		"Fix: a write learns the latest generation in its commit (e.g. a sealed current-generation value read in the " +
		"write's transaction), or a handle refuses to seal with generation 1 once a limited person exists")
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	stale := openPerson(t, personCfg(st, "olga", "o")) // knows generation 1 only
	require.NoError(t, vault.CollectionOf[Note](owner, "payroll").Put(ctx, "p-1", Note{Text: "salary"}))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))

	require.NoError(t, vault.CollectionOf[Note](stale, "payroll").Put(ctx, "p-2", Note{Text: "secret salary"}))

	bobKeys := entryKeys(t, st, "bob", "b")
	opened, total := rawOpens(t, st, "payroll", bobKeys)
	require.Equal(t, 2, total)
	assert.Zero(t, opened, "a payroll record written by a stale handle opens with bob's keys")
}

// TestReview15bOfflineDeviceSealsForLimitedPerson: olga's second device,
// open and synced before bob was limited to "notes" on her first, writes
// a payroll record and then syncs (once before its write, once after, as
// a device offline during the grant does). On the hub that record must
// not open with any key bob's entry holds: the grant promises it, and no
// one is asked to resume a rotation.
func TestReview15bOfflineDeviceSealsForLimitedPerson(t *testing.T) {
	t.Skip("known bug (review15b #2): a device that wrote before its Sync brought the limited grant pushes records " +
		"sealed with the first generation's data key to the hub, where they stay (no rotation pending, nothing " +
		"re-seals them) and open with the limited person's keys. Fix: Sync re-seals, with the latest generation it " +
		"learnt from the pulled keyring, the records it pushes that are sealed by an older one")
	for _, syncFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "synced-first", false: "offline"}[syncFirst], func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "salary"}))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
			mustSync(t, b)
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
			mustSync(t, a)
			if syncFirst {
				mustSync(t, b)
			}
			require.NoError(t, vault.CollectionOf[Note](b, "payroll").Put(ctx, "p-2", Note{Text: "secret salary"}))
			mustSync(t, b)
			mustSync(t, a)

			bobKeys := entryKeys(t, hub, "bob", "b")
			opened, total := rawOpens(t, hub, "payroll", bobKeys)
			require.Equal(t, 2, total)
			assert.Zero(t, opened, "a payroll record written on olga's second device opens with bob's keys on the hub")
			verified(t, a)
		})
	}
}
