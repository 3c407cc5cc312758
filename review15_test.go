package noydb_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
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

// TestReview15StaleHandleWritesAfterRotation: handles that do not know
// a generation another handle of the same person rotated to write over
// records sealed by it, each through another path (a Put, a
// Collection.Update, a Delete, a Vault.Update), all of which open the
// previous revision inside their transaction and load the generation
// there, on every store with transactions. On memstore that load once
// waited for the transaction's own lock for ever; a hung write fails the
// test (after a timeout) instead of hanging it.
func TestReview15StaleHandleWritesAfterRotation(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			// A hung write holds the store for ever: then nothing is
			// closed (Close would wait for it), the store is left behind.
			var hung atomic.Bool
			open := func() *vault.Vault {
				v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
				require.NoError(t, err)
				t.Cleanup(func() {
					if !hung.Load() {
						_ = v.Close()
					}
				})
				return v
			}
			b := open()
			ops := map[string]func(ctx context.Context, v *vault.Vault) error{
				"put": func(ctx context.Context, v *vault.Vault) error {
					return vault.CollectionOf[Note](v, "notes").Put(ctx, "put", Note{Text: "by a"})
				},
				"update": func(ctx context.Context, v *vault.Vault) error {
					_, err := vault.CollectionOf[Note](v, "notes").Update(ctx, "update", func(n *Note) error {
						n.Text += ", by a"
						return nil
					})
					return err
				},
				"delete": func(ctx context.Context, v *vault.Vault) error {
					return vault.CollectionOf[Note](v, "notes").Delete(ctx, "delete")
				},
				"tx": func(ctx context.Context, v *vault.Vault) error {
					return v.Update(ctx, func(tx *vault.Tx) error {
						notes := vault.CollectionOf[Note](v, "notes").In(tx)
						n, err := notes.Get("tx")
						if err != nil {
							return err
						}
						return notes.Put("tx", Note{Text: n.Text + ", by a"})
					})
				},
			}
			stale := map[string]*vault.Vault{}
			for op := range ops {
				stale[op] = open() // knows generation 1 only
			}
			rot, err := b.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			notesB := vault.CollectionOf[Note](b, "notes")
			for op := range ops {
				require.NoError(t, notesB.Put(ctx, op, Note{Text: "gen 2"}))
			}
			for op, write := range ops {
				ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				done := make(chan error, 1)
				go func() { done <- write(ctx, stale[op]) }()
				select {
				case err := <-done:
					require.NoError(t, err, op)
				case <-ctx.Done():
					hung.Store(true)
					cancel()
					t.Fatalf("%s: the write hangs", op)
				}
				cancel()
			}
			readNotes(t, b, map[string]string{"put": "by a", "update": "gen 2, by a", "tx": "gen 2, by a"})
			_, err = notesB.Get(ctx, "delete")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			verified(t, b)
		})
	}
}

// TestReview15StaleHandleOnFileDevice: the same on a device whose store
// is a file folder (no transactions: a write reads the previous revision
// outside any, by compare-and-swap): records re-sealed by a rotation made
// on another device reach the device by Sync, and handles opened there
// before the Sync write over them.
func TestReview15StaleHandleOnFileDevice(t *testing.T) {
	ctx := context.Background()
	hub, devA := memstore.New(), memstore.New()
	devF, err := filestore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = devF.Close() })
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	mustSync(t, a)
	ops := []string{"put", "update", "delete"}
	stale := map[string]*vault.Vault{}
	for _, op := range ops {
		stale[op] = openPerson(t, hubPerson(devF, hub, "olga", "o"))
	}
	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	for _, op := range ops {
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, op, Note{Text: "gen 2"}))
	}
	mustSync(t, a)
	mustSync(t, openPerson(t, hubPerson(devF, hub, "olga", "o")))

	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	require.NoError(t, vault.CollectionOf[Note](stale["put"], "notes").Put(ctx, "put", Note{Text: "by f"}))
	_, err = vault.CollectionOf[Note](stale["update"], "notes").Update(ctx, "update", func(n *Note) error {
		n.Text += ", by f"
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, vault.CollectionOf[Note](stale["delete"], "notes").Delete(ctx, "delete"))
	f := stale["put"]
	mustSync(t, f)
	mustSync(t, a)
	for _, v := range []*vault.Vault{a, f} {
		readNotes(t, v, map[string]string{"put": "by f", "update": "gen 2, by f"})
		_, err = vault.CollectionOf[Note](v, "notes").Get(ctx, "delete")
		assert.ErrorIs(t, err, vault.ErrNotFound)
		verified(t, v)
	}
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
// device A, bob changes his secret on device B, with a recovery code or
// with ChangeSecret, offline; each change raises bob's keyring entry to
// the same serial (or, with a recovery then a secret change, B's to a
// higher one, which lacks generation 2). After both devices Sync, his
// entry is one and the same on the hub and both devices: the new secret
// opens on each and reads the records of both generations, the old one is
// refused.
func TestReview15RecoveryRacesRotationOnTwoDevices(t *testing.T) {
	for _, how := range []string{"recovery", "change secret", "recovery then change secret",
		"recovery then change secret, B first", "recovery by a reader"} {
		bFirst := strings.HasSuffix(how, "B first")
		role := vault.RoleWriter
		if strings.HasSuffix(how, "reader") {
			role = vault.RoleReader // its Sync copies keyrings through a pull view
		}
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
			a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, a.Grant(ctx, "bob", vault.Secret([]byte("b")), role))
			require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "g1", Note{Text: "gen 1"}))
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
			// On device B alone, not synced: bob's new secret, and a record.
			secret := "b2"
			switch how {
			case "recovery", "recovery by a reader":
				bob = openPerson(t, recoverCfg(devB, "bob", codes[0], "b2"))
			case "change secret":
				bob = openPerson(t, personCfg(devB, "bob", "b"))
				require.NoError(t, bob.ChangeSecret(ctx, []byte("b"), []byte("b2")))
			default:
				bob = openPerson(t, recoverCfg(devB, "bob", codes[0], "b2"))
				require.NoError(t, bob.ChangeSecret(ctx, []byte("b2"), []byte("b3")))
				secret = "b3"
			}
			want := map[string]string{"g1": "gen 1", "g2": "gen 2"}
			if role == vault.RoleWriter {
				require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "by-bob", Note{Text: "offline"}))
				want["by-bob"] = "offline"
			}
			require.NoError(t, bob.Close())

			syncB := func() {
				rep := mustSync(t, openPerson(t, hubPerson(devB, hub, "bob", secret)))
				assert.Empty(t, rep.Rejected)
			}
			if bFirst {
				// B's change reaches the hub first; A then opens with the
				// hub (which brings a newer entry of bob, without
				// generation 2) and syncs.
				syncB()
				require.NoError(t, a.Close())
				a = openPerson(t, hubPerson(devA, hub, "olga", "o"))
				mustSync(t, a)
				syncB()
			} else {
				mustSync(t, a)
				syncB()
			}
			mustSync(t, a)

			readNotes(t, a, want)
			entry := func(st stores.Store) []byte {
				it, err := st.Get(ctx, "v/team/_keyring/bob")
				require.NoError(t, err)
				return it.Value
			}
			assert.Equal(t, entry(hub), entry(devA), "the hub's and device A's entry of bob")
			assert.Equal(t, entry(hub), entry(devB), "the hub's and device B's entry of bob")
			for name, dev := range map[string]stores.Store{"A": devA, "B": devB} {
				v, err := vault.Open(ctx, hubPerson(dev, hub, "bob", secret))
				require.NoError(t, err, "bob's new secret on device %s", name)
				readNotes(t, v, want)
				verified(t, v)
				require.NoError(t, v.Close())
				_, err = vault.Open(ctx, hubPerson(dev, hub, "bob", "b"))
				assert.ErrorIs(t, err, vault.ErrWrongSecret, "bob's old secret on device %s", name)
			}
			verified(t, a)
		})
	}
}
