package noydb_test

import (
	"context"
	"strconv"
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

// TestReview15bLimitedLifecycleVerifies: a writer limited to notes works
// through a hub while olga widens his collections, narrows them, rotates
// and finally revokes him; after each step every ledger (olga's device,
// bob's device, the hub) verifies.
func TestReview15bLimitedLifecycleVerifies(t *testing.T) {
	ctx := context.Background()
	hub := memstore.New()
	a := openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
	onHub := func() *vault.Vault { return openPerson(t, personCfg(hub, "olga", "o")) }
	all := func(b *vault.Vault) {
		t.Helper()
		verified(t, a)
		if b != nil {
			verified(t, b)
		}
		verified(t, onHub())
	}
	require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "salary"}))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
	mustSync(t, a)
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	mustSync(t, a)
	b := openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
	mustSync(t, b)
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "b-1", Note{Text: "by bob"}))
	mustSync(t, b)
	mustSync(t, a)
	all(b)

	require.NoError(t, a.SetCollections(ctx, "bob", "notes", "memos"))
	mustSync(t, a)
	require.NoError(t, b.Close())
	b = openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
	mustSync(t, b)
	require.NoError(t, vault.CollectionOf[Note](b, "memos").Put(ctx, "m-1", Note{Text: "memo"}))
	mustSync(t, b)
	mustSync(t, a)
	all(b)

	require.NoError(t, a.SetCollections(ctx, "bob", "memos"))
	mustSync(t, a)
	require.NoError(t, b.Close())
	b = openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
	mustSync(t, b)
	require.NoError(t, vault.CollectionOf[Note](b, "memos").Put(ctx, "m-2", Note{Text: "memo 2"}))
	_, err := vault.CollectionOf[Note](b, "notes").Get(ctx, "n-1")
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	mustSync(t, b)
	mustSync(t, a)
	all(b)

	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, vault.CollectionOf[Note](b, "memos").Put(ctx, "m-3", Note{Text: "memo 3"}))
	mustSync(t, b)
	mustSync(t, a)
	all(b)

	require.NoError(t, a.SetCollections(ctx, "bob"))
	mustSync(t, a)
	require.NoError(t, b.Close())
	b = openPerson(t, hubPerson(memstore.New(), hub, "bob", "b"))
	mustSync(t, b)
	got, err := vault.CollectionOf[Note](b, "payroll").Get(ctx, "p-1")
	require.NoError(t, err)
	assert.Equal(t, "salary", got.Text)
	mustSync(t, a)
	all(b)

	require.NoError(t, a.Revoke(ctx, "bob"))
	require.NoError(t, a.Rotation().Wait(ctx))
	mustSync(t, a)
	all(nil)
}

// TestReview15bLimitedSecretChangeRacesRotation: bob, limited to notes,
// changes his secret once or twice on his device (his entry's serial
// rises by one or two) while olga, on hers, rotates (his entry gets the
// notes key of the new generation, its serial rises by one) and re-seals
// the notes. After both sync, bob's last secret opens on every store and
// he still reads the note: the keyring merge keeps the collection keys of
// the rotation, as it keeps a person's data key generations.
func TestReview15bLimitedSecretChangeRacesRotation(t *testing.T) {
	for _, changes := range []int{1, 2} {
		t.Run(strconv.Itoa(changes), func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "note"}))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
			mustSync(t, b)

			secret := "b"
			for i := range changes {
				next := "b" + strconv.Itoa(i+2)
				require.NoError(t, b.ChangeSecret(ctx, []byte(secret), []byte(next)))
				secret = next
			}
			rot, err := a.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			mustSync(t, a)
			mustSync(t, b)
			mustSync(t, a)
			mustSync(t, b)
			require.NoError(t, b.Close())

			for _, cfg := range []vault.Config{hubPerson(devB, hub, "bob", secret), personCfg(hub, "bob", secret),
				hubPerson(devA, hub, "bob", secret)} {
				again, err := vault.Open(ctx, cfg)
				require.NoError(t, err)
				got, err := vault.CollectionOf[Note](again, "notes").Get(ctx, "n-1")
				if assert.NoError(t, err, "bob reads a note re-sealed by the rotation") {
					assert.Equal(t, "note", got.Text)
				}
				require.NoError(t, again.Close())
			}
			verified(t, a)
			verified(t, openPerson(t, personCfg(hub, "olga", "o")))
			b = openPerson(t, hubPerson(devB, hub, "bob", secret))
			require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "n-2", Note{Text: "by bob"}))
			mustSync(t, b)
			verified(t, b)
			verified(t, openPerson(t, personCfg(hub, "olga", "o")))
		})
	}
}

// TestReview15bWidenedPersonPullsOlderRecords: bob, limited to notes,
// syncs his device (which skips the memos records); olga then gives him
// memos too. After he opens again on the same device and syncs, he reads
// the memos written before the change, as he would on a new device.
func TestReview15bWidenedPersonPullsOlderRecords(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "memos").Put(ctx, "m-1", Note{Text: "memo"}))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
	mustSync(t, a)
	b, err := vault.Open(ctx, hubPerson(devB, hub, "bob", "b"))
	require.NoError(t, err)
	mustSync(t, b)
	require.NoError(t, b.Close())

	require.NoError(t, a.SetCollections(ctx, "bob", "notes", "memos"))
	mustSync(t, a)
	b = openPerson(t, hubPerson(devB, hub, "bob", "b"))
	mustSync(t, b)
	got, err := vault.CollectionOf[Note](b, "memos").Get(ctx, "m-1")
	if assert.NoError(t, err, "a memo written before bob was given memos") {
		assert.Equal(t, "memo", got.Text)
	}
}

// TestReview15bPutBackEntryGetsNextGeneration: a store (or the person
// themself, who shares it) puts back a keyring entry as it was before a
// change that took access away: carl's before his revocation, bob's
// before his collections were narrowed to notes. The next rotation an
// owner makes must not wrap its new key for the entry put back: the
// records written afterwards must not open with any key that entry then
// holds.
func TestReview15bPutBackEntryGetsNextGeneration(t *testing.T) {
	for _, change := range []string{"revoke", "narrow"} {
		t.Run(change, func(t *testing.T) {
			ctx := context.Background()
			st := memstore.New()
			owner := openPerson(t, personCfg(st, "olga", "o"))
			user, secret := "carl", "c"
			if change == "narrow" {
				user, secret = "bob", "b"
				require.NoError(t, owner.Grant(ctx, user, vault.Secret([]byte(secret)), vault.RoleWriter, "notes", "payroll"))
			} else {
				require.NoError(t, owner.Grant(ctx, user, vault.Secret([]byte(secret)), vault.RoleWriter))
			}
			saved, err := st.Get(ctx, "v/team/_keyring/"+user)
			require.NoError(t, err)
			if change == "narrow" {
				require.NoError(t, owner.SetCollections(ctx, user, "notes"))
			} else {
				require.NoError(t, owner.Revoke(ctx, user))
				require.NoError(t, owner.Rotation().Wait(ctx))
			}
			_, err = st.Put(ctx, "v/team/_keyring/"+user, saved.Value)
			require.NoError(t, err)

			rot, err := owner.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			assert.Equal(t, []string{user}, rot.Skipped(), "the entry put back is not skipped")
			after, err := st.Get(ctx, "v/team/_keyring/"+user)
			require.NoError(t, err)
			assert.Equal(t, saved.Value, after.Value, "the entry put back was rewritten")
			require.NoError(t, vault.CollectionOf[Note](owner, "payroll").Put(ctx, "p-new", Note{Text: "after"}))
			opened, total := rawOpens(t, st, "payroll", entryKeys(t, st, user, secret))
			require.Equal(t, 1, total)
			assert.Zero(t, opened, "a payroll record written after the rotation opens with the keys of the entry put back")
		})
	}
}

// TestReview15bChangeRacesTakingAccessAway: on his device, offline, bob
// changes his secret twice (his entry's serial rises by two) while olga,
// on hers, revokes him or narrows his collections to notes (his entry's
// serial rises by one). After both sync, the change olga made holds on
// the hub and on her device: bob is revoked, or limited to notes.
func TestReview15bChangeRacesTakingAccessAway(t *testing.T) {
	for _, change := range []string{"revoke", "narrow"} {
		t.Run(change, func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, vault.CollectionOf[Note](a, "payroll").Put(ctx, "p-1", Note{Text: "salary"}))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes", "payroll"))
			mustSync(t, a)
			b := openPerson(t, hubPerson(devB, hub, "bob", "b"))
			mustSync(t, b)

			require.NoError(t, b.ChangeSecret(ctx, []byte("b"), []byte("b2")))
			require.NoError(t, b.ChangeSecret(ctx, []byte("b2"), []byte("b3")))
			if change == "revoke" {
				require.NoError(t, a.Revoke(ctx, "bob"))
				require.NoError(t, a.Rotation().Wait(ctx))
			} else {
				require.NoError(t, a.SetCollections(ctx, "bob", "notes"))
			}
			mustSync(t, a)
			_, _ = b.Sync(ctx) // a revoked person's sync may fail
			mustSync(t, a)

			for _, v := range []*vault.Vault{a, openPerson(t, personCfg(hub, "olga", "o"))} {
				people, err := v.People(ctx)
				require.NoError(t, err)
				for _, p := range people {
					if p.Name != "bob" {
						continue
					}
					if change == "revoke" {
						assert.True(t, p.Revoked, "bob's revocation undone by his secret changes")
					} else {
						assert.Equal(t, []string{"notes"}, p.Collections, "bob's narrowing undone by his secret changes")
					}
				}
			}
			again, err := vault.Open(ctx, hubPerson(memstore.New(), hub, "bob", "b3"))
			if err == nil {
				require.NoError(t, again.Close())
			}
			if change == "revoke" {
				assert.ErrorIs(t, err, vault.ErrNoAccess, "bob's new secret opens after his revocation")
			}
		})
	}
}
