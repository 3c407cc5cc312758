package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestReview15ReaderPullsAfterRotation: a reader on a device of a hub
// keeps pulling after an owner rotated the keys elsewhere: a record
// written with generation 2 reaches it, and so does its next revision
// (which the reader's Sync compares with the generation 2 copy its device
// already holds).
func TestReview15ReaderPullsAfterRotation(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	notesA := vault.CollectionOf[Note](a, "notes")
	require.NoError(t, a.Grant(ctx, "carol", vault.Secret([]byte("c")), vault.RoleReader))
	require.NoError(t, notesA.Put(ctx, "n1", Note{Text: "one"}))
	mustSync(t, a)
	carol := openPerson(t, hubPerson(devB, hub, "carol", "c"))
	mustSync(t, carol)

	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, notesA.Put(ctx, "n2", Note{Text: "two"}))
	mustSync(t, a)
	rep := mustSync(t, carol)
	assert.Empty(t, rep.Rejected)
	notesB := vault.CollectionOf[Note](carol, "notes")
	for id, want := range map[string]string{"n1": "one", "n2": "two"} {
		got, err := notesB.Get(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, want, got.Text, id)
	}

	require.NoError(t, notesA.Put(ctx, "n2", Note{Text: "two, again"}))
	mustSync(t, a)
	rep = mustSync(t, carol)
	assert.Empty(t, rep.Rejected)
	got, err := notesB.Get(ctx, "n2")
	require.NoError(t, err)
	assert.Equal(t, "two, again", got.Text)
	verified(t, carol)
}

// readNotes checks that v reads every note of want with its text.
func readNotes(t testing.TB, v *vault.Vault, want map[string]string) {
	t.Helper()
	notes := vault.CollectionOf[Note](v, "notes")
	for id, text := range want {
		got, err := notes.Get(context.Background(), id)
		require.NoError(t, err, id)
		assert.Equal(t, text, got.Text, id)
	}
}

// TestReview15RecoveryAcrossRotation: codes issued before a rotation and
// codes issued after it both open, and the vault opened with a code reads
// records of every generation; a rotation made by the recovered handle
// works, and the new secret then opens and reads everything.
func TestReview15RecoveryAcrossRotation(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b0")), vault.RoleWriter))
	require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "g1", Note{Text: "gen 1"}))
	bob := openPerson(t, personCfg(st, "bob", "b0"))
	before, err := bob.RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	// Bob's Close leaves his handle's keys wiped; the codes stay good.
	require.NoError(t, bob.Close())

	rot, err := owner.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "g2", Note{Text: "gen 2"}))
	want := map[string]string{"g1": "gen 1", "g2": "gen 2"}

	v := openPerson(t, recoverCfg(st, "bob", before[0], "b1"))
	readNotes(t, v, want)
	after, err := v.RecoveryCodes(ctx, 1)
	require.NoError(t, err, "codes issued after a rotation")
	require.NoError(t, v.Close())

	rot, err = owner.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "g3", Note{Text: "gen 3"}))
	want["g3"] = "gen 3"

	v = openPerson(t, recoverCfg(st, "bob", after[0], "b2"))
	readNotes(t, v, want)
	require.NoError(t, owner.Grant(ctx, "rex", vault.Secret([]byte("r")), vault.RoleOwner))
	require.NoError(t, v.Close())

	rex := openPerson(t, personCfg(st, "rex", "r"))
	rot, err = rex.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](rex, "notes").Put(ctx, "g4", Note{Text: "gen 4"}))
	want["g4"] = "gen 4"
	readNotes(t, openPerson(t, personCfg(st, "bob", "b2")), want)
	_, err = vault.Open(ctx, personCfg(st, "bob", "b1"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	verified(t, owner)
}

// TestReview15RecoveredOwnerRotates: an owner who opened with a recovery
// code rotates in that handle; records written then read back there, after
// Close with the new secret, and by another person.
func TestReview15RecoveredOwnerRotates(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleReader))
	codes, err := owner.RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "g1", Note{Text: "gen 1"}))
	require.NoError(t, owner.Close())

	v := openPerson(t, recoverCfg(st, "olga", codes[0], "o2"))
	rot, err := v.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](v, "notes").Put(ctx, "g2", Note{Text: "gen 2"}))
	want := map[string]string{"g1": "gen 1", "g2": "gen 2"}
	readNotes(t, v, want)
	// Codes issued by the recovered handle, after its rotation.
	more, err := v.RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, v.Close())
	readNotes(t, openPerson(t, personCfg(st, "olga", "o2")), want)
	readNotes(t, openPerson(t, personCfg(st, "bob", "b")), want)
	readNotes(t, openPerson(t, recoverCfg(st, "olga", more[0], "o3")), want)
}

// TestReview15IdentityAcrossRotation: a person opening with
// Config.Identity rotates, closes, and opens again with the same identity
// (the vault never wipes it: it is the caller's), also after a failed open
// (a wrong user) and after a rotation by someone else.
func TestReview15IdentityAcrossRotation(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	id, pub := newIdentity(t)
	owner := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, owner.Grant(ctx, "ida", vault.PublicKey(pub), vault.RoleOwner))
	require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "g1", Note{Text: "gen 1"}))
	icfg := personCfg(st, "ida", "")
	icfg.Identity = id

	v := openPerson(t, icfg)
	rot, err := v.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](v, "notes").Put(ctx, "g2", Note{Text: "gen 2"}))
	require.NoError(t, v.Close())

	bad := icfg
	bad.User = "olga" // opens with a secret: refused, the identity untouched
	_, err = vault.Open(ctx, bad)
	require.ErrorIs(t, err, vault.ErrWrongSecret)

	rot, err = owner.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](owner, "notes").Put(ctx, "g3", Note{Text: "gen 3"}))

	v = openPerson(t, icfg)
	readNotes(t, v, map[string]string{"g1": "gen 1", "g2": "gen 2", "g3": "gen 3"})
	got, err := id.PublicKey()
	require.NoError(t, err, "the identity is the caller's: not wiped by Close")
	assert.Equal(t, pub, got)
}

// TestReview15StaleHandleWritesAfterRotation: a handle that does not know
// a generation another handle of the same person rotated to writes over a
// record sealed by it (the write opens the previous revision inside its
// transaction).
func TestReview15StaleHandleWritesAfterRotation(t *testing.T) {
	t.Skip("known bug: on memstore the write deadlocks: openRecord, inside the ledger's transaction " +
		"(memstore holds its write lock), loads the unknown generation with a store Get (genKeys.load), " +
		"which waits for that lock forever; Close then waits for the write")
	ctx := context.Background()
	st := memstore.New()
	a := openPerson(t, personCfg(st, "olga", "o"))
	b := openPerson(t, personCfg(st, "olga", "o"))
	rot, err := b.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "n1", Note{Text: "gen 2"}))
	done := make(chan error, 1)
	go func() { done <- vault.CollectionOf[Note](a, "notes").Put(ctx, "n1", Note{Text: "by a"}) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the write hangs")
	}
	readNotes(t, b, map[string]string{"n1": "by a"})
}

// TestReview15RecoveryOnDeviceAfterSync: olga issues codes on device A
// and syncs; on device B, with the hub, a code opens (the codes came with
// the hub), then B rotates and syncs; on A the new secret opens, reads
// the records of both generations, the code is used and the old secret
// refused.
func TestReview15RecoveryOnDeviceAfterSync(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "g1", Note{Text: "gen 1"}))
	codes, err := a.RecoveryCodes(ctx, 2)
	require.NoError(t, err)
	mustSync(t, a)
	require.NoError(t, a.Close())

	cfg := recoverCfg(devB, "olga", codes[0], "o2")
	cfg.Hub = hub
	b := openPerson(t, cfg)
	mustSync(t, b)
	rot, err := b.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "g2", Note{Text: "gen 2"}))
	mustSync(t, b)

	_, err = vault.Open(ctx, hubPerson(devA, hub, "olga", "o"))
	assert.ErrorIs(t, err, vault.ErrWrongSecret)
	used := recoverCfg(devA, "olga", codes[0], "o3")
	used.Hub = hub
	_, err = vault.Open(ctx, used)
	assert.ErrorIs(t, err, vault.ErrRecoveryCodeUsed)
	a = openPerson(t, hubPerson(devA, hub, "olga", "o2"))
	mustSync(t, a)
	readNotes(t, a, map[string]string{"g1": "gen 1", "g2": "gen 2"})
	verified(t, a)
}

// TestReview15RecoveryRacesRotationOnTwoDevices: while olga rotates on
// device A, bob recovers on device B (both offline); after both Sync, bob's
// new secret should open on A and read the records of generation 2.
func TestReview15RecoveryRacesRotationOnTwoDevices(t *testing.T) {
	t.Skip("known bug: the rotation and the recovery each raise bob's keyring entry serial by one; " +
		"copyKeyring keeps the entry with the higher serial, so neither replaces the other: the hub keeps " +
		"the rotated entry (old secret), device B the recovered one (new secret, no generation 2), and " +
		"bob's Sync on B fails (notes/g2 does not open: 'feed does not verify'); the code is used up")
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
	mustSync(t, a)
	bob := openPerson(t, hubPerson(devB, hub, "bob", "b"))
	codes, err := bob.RecoveryCodes(ctx, 1)
	require.NoError(t, err)
	mustSync(t, bob)
	require.NoError(t, bob.Close())

	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "g2", Note{Text: "gen 2"}))
	cfg := recoverCfg(devB, "bob", codes[0], "b2")
	bob = openPerson(t, cfg) // on the device alone: not synced yet
	require.NoError(t, bob.Close())
	mustSync(t, a)
	mustSync(t, openPerson(t, hubPerson(devB, hub, "bob", "b2")))
	mustSync(t, a)

	v, err := vault.Open(ctx, hubPerson(devA, hub, "bob", "b2"))
	require.NoError(t, err, "bob's new secret, after both devices synced")
	t.Cleanup(func() { _ = v.Close() })
	readNotes(t, v, map[string]string{"g2": "gen 2"})
}
