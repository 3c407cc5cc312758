package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// pushers returns the stores of device B in these tests, by name:
// memstore, badger, and a file folder (a device that commits a pull in
// steps), each with the store of device A, which rotates the vault's keys
// (a rotation needs transactions: a memstore beside the folder).
func pushers() map[string][2]func(testing.TB) stores.Store {
	out := map[string][2]func(testing.TB) stores.Store{}
	for name, newStore := range memAndBadger() {
		out[name] = [2]func(testing.TB) stores.Store{newStore, newStore}
	}
	out["filestore"] = [2]func(testing.TB) stores.Store{newFolder, func(testing.TB) stores.Store { return memstore.New() }}
	return out
}

// pushedUnheard has olga's device B write note n-1 as "1" (synced to A),
// then "2", pushed by a Sync whose hub commit went through but whose reply
// was lost, then "3", not synced. Device A then pulls "2" and does what
// onA says, then syncs. It returns A and B; devs are the stores of B and A.
func pushedUnheard(t *testing.T, devs [2]func(testing.TB) stores.Store, onA func(a *vault.Vault, hub stores.Store)) (*vault.Vault, *vault.Vault) {
	t.Helper()
	ctx := context.Background()
	hub := memstore.New()
	hubB, lost := ambiguousHub(hub)
	a := openPerson(t, hubPerson(devs[1](t), hub, "olga", "o"))
	b := openPerson(t, hubPerson(devs[0](t), hubB, "olga", "o"))
	nb := vault.CollectionOf[Note](b, "notes")
	require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "1"}))
	mustSync(t, b)
	mustSync(t, a)

	require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "2"}))
	lost.Store(1)
	_, err := b.Sync(ctx)
	require.ErrorIs(t, err, errLostReply, "the push committed, its reply lost")
	require.NoError(t, nb.Put(ctx, "n-1", Note{Text: "3"}))

	mustSync(t, a)
	require.Equal(t, "2", notesOf(t, a)["n-1"].Value.Text, "A pulled B's push")
	onA(a, hub)
	mustSync(t, a)
	return a, b
}

// rotateOn rotates the keys of v and waits for the re-sealing.
func rotateOn(t *testing.T, v *vault.Vault) {
	t.Helper()
	ctx := context.Background()
	rot, err := v.RotateKeys(ctx)
	require.NoError(t, err)
	require.NoError(t, rot.Wait(ctx))
}

// TestSyncKeepsAChangeAfterAnAmbiguousPushResealedTwice: olga's device B
// pushes note n-1 as "2" (revision 2); the hub commits it but the reply
// is lost, and B writes "3". Her device A pulls revision 2 and rotates the
// vault's keys twice before it syncs: its push carries revision 4, a
// re-seal of revision 2 two revisions above it. B's next Sync recognises
// its own push, then that re-seal of it: no change to decide against, so
// B's "3" stands with no conflict and reaches A. The re-seal used to count
// as a re-seal of the push only one revision above it: two rotations made
// it a change, the conflict went by revision, and revision 4 beat B's
// revision 3: "2" came back on every device, with no conflict reported to
// A, which had changed nothing.
func TestSyncKeepsAChangeAfterAnAmbiguousPushResealedTwice(t *testing.T) {
	for name, devs := range pushers() {
		t.Run(name, func(t *testing.T) {
			a, b := pushedUnheard(t, devs, func(a *vault.Vault, _ stores.Store) {
				rotateOn(t, a)
				rotateOn(t, a)
			})
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

// TestSyncKeepsAChangeAfterAnAmbiguousPushResealedBeforeAPush: as above,
// but A rotates once, and then hears at its Sync of a rotation made on
// another device C (which held no record): its push first re-seals n-1
// again with the newer keys (a re-seal before a push), and carries that.
// B's "3" stands as above. The push used to say a re-seal only of a record
// whose last change in its device's ledger, as the push read it, was one:
// the re-seal before the push was written after that read, so the hub's
// entry named a change, and B's revision 3 was decided against A's 4.
func TestSyncKeepsAChangeAfterAnAmbiguousPushResealedBeforeAPush(t *testing.T) {
	for name, devs := range pushers() {
		t.Run(name, func(t *testing.T) {
			a, b := pushedUnheard(t, devs, func(a *vault.Vault, hub stores.Store) {
				rotateOn(t, a)
				c := openPerson(t, hubPerson(memstore.New(), hub, "olga", "o"))
				rotateOn(t, c)
			})
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

// TestSyncDecidesAChangeResealedBeforeItsPushAgainstAnAmbiguousPush: as
// above, but A changes note n-1 ("2a") before it rotates: its push
// carries a re-seal whose content is A's change, not B's push. That is a
// change on both sides, decided by the collection's policy with a
// conflict reported (the higher revision, A's, wins by default), never
// taken for a re-seal of B's push, which would drop A's change without a
// word.
func TestSyncDecidesAChangeResealedBeforeItsPushAgainstAnAmbiguousPush(t *testing.T) {
	for name, devs := range pushers() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			a, b := pushedUnheard(t, devs, func(a *vault.Vault, _ stores.Store) {
				require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n-1", Note{Text: "2a"}))
				rotateOn(t, a)
			})
			rep := mustSync(t, b)
			require.Len(t, rep.Conflicts, 1, "a change on both sides")
			assert.True(t, rep.Conflicts[0].HubWon, "A's revision 4 is higher than B's 3")
			mustSync(t, a)
			for name, v := range map[string]*vault.Vault{"A": a, "B": b} {
				assert.Equal(t, "2a", notesOf(t, v)["n-1"].Value.Text, "device %s: A's change, at the higher revision", name)
			}
			lost, err := b.LostConflicts(ctx)
			require.NoError(t, err)
			assert.Len(t, lost, 1, "B keeps its losing side")
			verified(t, a)
			verified(t, b)
		})
	}
}
