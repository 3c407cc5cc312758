package noydb_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// keyringConflicts wraps st so that the next n compare-and-swaps of a
// keyring entry (armed by the returned counter) lose a race: they report
// stores.ErrConflict and write nothing, as when another writer of the
// device changed the entry between the read and the write.
func keyringConflicts(st stores.Store) (stores.Store, *atomic.Int64) {
	var n atomic.Int64
	return faultstore.New(st, faultstore.Options{Before: func(op faultstore.Op, key string) error {
		if op == faultstore.OpCompareAndSwap && strings.Contains(key, "/_keyring/") && n.Add(-1) >= 0 {
			return stores.ErrConflict
		}
		return nil
	}}), &n
}

// TestSyncBringsARotationPastAKeyringRace: olga rotates on device A and
// writes with the new generation; device B's Sync copies her new keyring
// entry from the hub while its store makes that copy lose a race a few
// times. The Sync still brings the entry, and with it the generation: it
// pulls the record sealed with it, where it used to fail with
// ErrHubTampered on an honest hub (the copy gave up at the first lost
// race, and the record named a generation B did not hold).
func TestSyncBringsARotationPastAKeyringRace(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			syncBringsARotationPastAKeyringRace(t, memstore.New(), newStore(t), newStore(t))
		})
	}
}

func syncBringsARotationPastAKeyringRace(t *testing.T, hub, devA, devB stores.Store) {
	ctx := context.Background()
	storeB, races := keyringConflicts(devB)
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	b := openPerson(t, hubPerson(storeB, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "before"}))
	mustSync(t, a)
	mustSync(t, b)

	rot, err := a.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-2", Note{Text: "with generation 2"}))
	mustSync(t, a)

	races.Store(3)
	rep, err := b.Sync(ctx)
	require.NoError(t, err, "an honest hub, a busy device store")
	assert.Equal(t, 2, rep.Pulled)
	got := notesOf(t, b)
	assert.Equal(t, "before", got["n-1"].Value.Text)
	assert.Equal(t, "with generation 2", got["n-2"].Value.Text)
	assert.Equal(t, map[uint64]int{2: 2}, generations(t, devB))
	verified(t, b)
}

// TestSyncPullsARotationMadeDuringIt: olga's device B syncs; after its
// keyring step has copied her keyring entry from the hub, and before it
// reads the hub's feed, her device A rotates the vault's keys (on the hub
// first), writes a note with the new generation and syncs. B's pull then
// meets records sealed with a generation its keyring step did not bring.
// It brings the keyring again and pulls them, where it used to fail with
// ErrHubTampered on an honest hub ("notes/n-1 is not the revision 2 its
// feed entry names": a record that did not open was taken for one the hub
// had altered).
func TestSyncPullsARotationMadeDuringIt(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			syncPullsARotationMadeDuringIt(t, memstore.New(), newStore(t), newStore(t))
		})
	}
}

func syncPullsARotationMadeDuringIt(t *testing.T, hub, devA, devB stores.Store) {
	ctx := context.Background()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "before"}))
	mustSync(t, a)
	mustSync(t, b)
	require.NoError(t, vault.CollectionOf[Note](b, "notes").Put(ctx, "n-0", Note{Text: "from B"}))

	var once atomic.Bool
	rotateOnA := func(p vault.SyncProgress) {
		if p.Phase != vault.SyncPulling || !once.CompareAndSwap(false, true) {
			return
		}
		rot, err := a.RotateKeys(ctx)
		require.NoError(t, err)
		require.NoError(t, rot.Wait(ctx))
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-2", Note{Text: "with generation 2"}))
		mustSync(t, a)
	}
	_, err := b.SyncWith(ctx, vault.SyncOptions{Progress: rotateOnA})
	require.NoError(t, err, "an honest hub, a rotation made during the sync")
	require.True(t, once.Load(), "the rotation ran during the pull")
	got := notesOf(t, b)
	assert.Equal(t, "before", got["n-1"].Value.Text)
	assert.Equal(t, "with generation 2", got["n-2"].Value.Text)
	mustSync(t, a)
	assert.Equal(t, "from B", notesOf(t, a)["n-0"].Value.Text)
	verified(t, a)
	verified(t, b)
}

// TestSyncRotationKeepsConcurrentChanges: olga's device A rotates the
// vault's keys (re-sealing note n-1: a new revision of the same content)
// while her device B, which has not heard of it, changes n-1. Whichever of
// the two reaches the hub first, B's change is what both devices hold in
// the end, and no conflict is reported: a re-seal changed nothing to
// decide against. It used to lose when the re-seal's revision was the
// higher (A rotated more than once, or a deletion against the re-seal's
// one new revision): both devices then held the old content.
func TestSyncRotationKeepsConcurrentChanges(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			for _, c := range resealRaces() {
				t.Run(c.name, func(t *testing.T) { rotationKeepsChange(t, memstore.New(), newStore(t), newStore(t), c) })
			}
		})
	}
}

// resealRace is one case of TestSyncRotationKeepsConcurrentChanges: A
// rotates rotations times; B deletes n-1 (or puts "24"); A syncs first
// (its re-seal reaches the hub before B's change) or B does.
type resealRace struct {
	name      string
	rotations int
	del       bool
	bFirst    bool
}

func resealRaces() []resealRace {
	return []resealRace{
		{name: "put after the re-seal reached the hub", rotations: 2},
		{name: "put reaching the hub before the re-seal", rotations: 3, bFirst: true},
		{name: "deletion after the re-seal reached the hub", rotations: 1, del: true},
		{name: "deletion reaching the hub before the re-seal", rotations: 1, del: true, bFirst: true},
	}
}

func rotationKeepsChange(t *testing.T, hub, devA, devB stores.Store, c resealRace) {
	ctx := context.Background()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	b := openPerson(t, hubPerson(devB, hub, "olga", "o"))
	nb := vault.CollectionOf[Note](b, "notes")
	require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "4"}))
	mustSync(t, b)
	mustSync(t, a)

	for range c.rotations {
		rot, err := a.RotateKeys(ctx)
		require.NoError(t, err)
		require.NoError(t, rot.Wait(ctx))
	}
	if c.del {
		require.NoError(t, nb.Delete(ctx, "n-1"))
	} else {
		require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "24"}))
	}
	first, second := a, b
	if c.bFirst {
		first, second = b, a
	}
	for _, v := range []*vault.Vault{first, second, first} {
		rep := mustSync(t, v)
		assert.Empty(t, rep.Conflicts, "a re-seal is no change to decide against")
	}
	for name, v := range map[string]*vault.Vault{"A": a, "B": b} {
		got, ok := notesOf(t, v)["n-1"]
		if c.del {
			assert.False(t, ok, "device %s: B's deletion", name)
			continue
		}
		assert.Equal(t, "24", got.Value.Text, "device %s: B's write", name)
	}
	verified(t, a)
	verified(t, b)
}

// TestSyncKeepsAChangeAfterAnAmbiguousPushResealed: olga's device B
// pushes note n-1 (revision 2), and the hub commits it but the reply is
// lost; B changes n-1 again. Her device A pulls revision 2 and rotates
// the vault's keys, which re-seals it as revision 3 on the hub. B's next
// Sync recognises its own push, of which it no longer holds the content,
// and then the re-seal: no change to decide against, so B's change stands
// with no conflict and both devices end with it. It used to be a conflict
// decided by the policy (the base of the recognised push had no content
// sum, so the re-seal counted as a change), which B's change could lose.
func TestSyncKeepsAChangeAfterAnAmbiguousPushResealed(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub := memstore.New()
			var lose atomic.Bool
			hubB := faultstore.New(hub, faultstore.Options{After: func(op faultstore.Op, _ string) error {
				if op == faultstore.OpUpdate && lose.CompareAndSwap(true, false) {
					return errLostAfterCommit
				}
				return nil
			}})
			a := openPerson(t, hubPerson(newStore(t), hub, "olga", "o"))
			b := openPerson(t, hubPerson(newStore(t), hubB, "olga", "o"))
			nb := vault.CollectionOf[Note](b, "notes")
			require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "1"}))
			mustSync(t, b)
			mustSync(t, a)

			require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "2"}))
			lose.Store(true)
			_, err := b.Sync(ctx)
			require.ErrorIs(t, err, errLostAfterCommit, "the push committed, its reply lost")
			require.False(t, lose.Load())
			require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "3"}))

			mustSync(t, a)
			rot, err := a.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			mustSync(t, a)

			rep := mustSync(t, b)
			assert.Empty(t, rep.Conflicts, "a re-seal of B's own push is no change to decide against")
			mustSync(t, a)
			for name, v := range map[string]*vault.Vault{"A": a, "B": b} {
				assert.Equal(t, "3", notesOf(t, v)["n-1"].Value.Text, "device %s: B's last write", name)
			}
			verified(t, a)
			verified(t, b)
		})
	}
}

// TestSyncKeepsADeletionOverAnAmbiguouslyPushedReseal: olga's device A
// rotates the vault's keys, and its Sync pushes the re-seal of note n-1
// (revision 2), which the hub commits but whose reply is lost; A rotates
// again before it syncs, re-sealing n-1 once more (revision 3, on A
// only). Her device B deletes n-1 and syncs: the hub's revision 2 is a
// re-seal of what B synced, so the deletion stands and reaches the hub.
// A's next Sync recognises its own push of revision 2, of which it holds
// a re-seal and nothing more: no change to decide against, so the
// deletion applies on A with no conflict and n-1 stays deleted on both.
// The base of the recognised push had no content sum, so A's second
// re-seal counted as a change, tied the deletion on revision and won:
// the deleted note came back on both devices.
func TestSyncKeepsADeletionOverAnAmbiguouslyPushedReseal(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			hub := memstore.New()
			hubA, lost := ambiguousHub(hub)
			a := openPerson(t, hubPerson(newStore(t), hubA, "olga", "o"))
			b := openPerson(t, hubPerson(newStore(t), hub, "olga", "o"))
			nb := vault.CollectionOf[Note](b, "notes")
			require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "1"}))
			mustSync(t, b)
			mustSync(t, a)

			rotate := func() {
				t.Helper()
				rot, err := a.RotateKeys(ctx)
				require.NoError(t, err)
				require.NoError(t, rot.Wait(ctx))
			}
			rotate()
			onHub := sealedNotes(t, hub)
			lost.Store(1)
			_, err := a.Sync(ctx)
			require.ErrorIs(t, err, errLostReply, "the push committed, its reply lost")
			require.NotEqual(t, onHub, sealedNotes(t, hub), "the re-seal reached the hub")
			rotate()

			require.NoError(t, nb.Delete(ctx, "n-1"))
			rep := mustSync(t, b)
			assert.Empty(t, rep.Conflicts, "a re-seal is no change to decide against")
			rep = mustSync(t, a)
			assert.Empty(t, rep.Conflicts, "A re-sealed its own push and changed nothing")
			mustSync(t, b)
			for name, v := range map[string]*vault.Vault{"A": a, "B": b} {
				_, ok := notesOf(t, v)["n-1"]
				assert.False(t, ok, "device %s: B's deletion", name)
			}
			assert.Empty(t, slices.Collect(maps.Keys(sealedNotes(t, hub))), "the hub holds the deletion")
			verified(t, a)
			verified(t, b)
		})
	}
}

// TestSyncRotationPostgresHub runs the rotation scenarios of this file
// with a PostgreSQL hub (under scripts/with-postgres).
func TestSyncRotationPostgresHub(t *testing.T) {
	t.Run("a keyring race", func(t *testing.T) {
		syncBringsARotationPastAKeyringRace(t, pgtest.Open(t, nil), memstore.New(), memstore.New())
	})
	for _, c := range resealRaces() {
		t.Run(c.name, func(t *testing.T) { rotationKeepsChange(t, pgtest.Open(t, nil), memstore.New(), memstore.New(), c) })
	}
}
