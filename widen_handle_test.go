package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/vault"
)

// TestCollectionsWidenedOpenHandle: bob, a writer given every collection,
// keeps a handle open while olga narrows him to notes (his handle learns
// it at its next write, and refuses payroll) and then gives him every
// collection again. The same handle sees the widening at its next call on
// payroll, as it saw the narrowing, without a reopen: the keys it lacked
// are wrapped to his box key, which it holds. It reads the payroll record
// re-sealed by the narrowing's rotation, writes a new one, and goes on
// after a later rotation, in payroll and in notes; the ledger verifies.
func TestCollectionsWidenedOpenHandle(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-1", Note{Text: "before"}))

			require.NoError(t, owner.SetCollections(ctx, "bob", "notes"))
			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-1", Note{Text: "narrowed"}))
			payroll := vault.CollectionOf[Note](bob, "payroll") // made while narrowed
			assert.ErrorIs(t, payroll.Put(ctx, "p-2", Note{Text: "refused"}), vault.ErrNotPermitted)

			require.NoError(t, owner.SetCollections(ctx, "bob"))
			got, err := payroll.Get(ctx, "p-1")
			require.NoError(t, err, "the open handle sees the widening")
			assert.Equal(t, "before", got.Text)
			require.NoError(t, payroll.Put(ctx, "p-2", Note{Text: "widened"}))
			got, err = vault.CollectionOf[Note](owner, "payroll").Get(ctx, "p-2")
			require.NoError(t, err)
			assert.Equal(t, "widened", got.Text)

			// A later rotation: the widened handle loads the new
			// generation's data key, as one given all collections does.
			rot, err := owner.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))
			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-2", Note{Text: "rotated"}))
			require.NoError(t, payroll.Put(ctx, "p-3", Note{Text: "rotated"}))
			got, err = vault.CollectionOf[Note](owner, "payroll").Get(ctx, "p-3")
			require.NoError(t, err)
			assert.Equal(t, "rotated", got.Text)
			verified(t, owner)
		})
	}
}

// TestCollectionsAddedOpenHandle: bob, limited to notes from his grant,
// keeps a handle open while olga adds memos to his collections (no
// rotation: the memos keys he lacked are wrapped to his box key). His
// handle's next call on memos sees it, reads olga's memo and writes one;
// payroll, never given, stays refused with ErrNotPermitted and nothing
// is written.
func TestCollectionsAddedOpenHandle(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
			require.NoError(t, vault.CollectionOf[Note](owner, "memos").Put(ctx, "m-1", Note{Text: "olga's"}))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			memos := vault.CollectionOf[Note](bob, "memos")
			_, err := memos.Get(ctx, "m-1")
			assert.ErrorIs(t, err, vault.ErrNotPermitted)

			require.NoError(t, owner.SetCollections(ctx, "bob", "memos", "notes"))
			got, err := memos.Get(ctx, "m-1")
			require.NoError(t, err, "the open handle sees the added collection")
			assert.Equal(t, "olga's", got.Text)
			require.NoError(t, memos.Put(ctx, "m-2", Note{Text: "bob's"}))
			got, err = vault.CollectionOf[Note](owner, "memos").Get(ctx, "m-2")
			require.NoError(t, err)
			assert.Equal(t, "bob's", got.Text)
			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-1", Note{Text: "still"}))

			before := snapshot(t, st)
			assert.ErrorIs(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-1", Note{Text: "x"}), vault.ErrNotPermitted)
			assert.Equal(t, before, snapshot(t, st), "a refused write changes nothing")
			verified(t, owner)
		})
	}
}

// TestCollectionsWidenedThenRotatedOpenHandle: bob, limited to notes from
// his grant, keeps a handle open while olga gives him every collection and
// then rotates the keys. His handle's next notes write loads the new
// generation: his keyring entry now holds its data key, not a notes key of
// it, and the handle takes that as the widening it is (rather than fail
// for want of a notes key); his payroll writes go on too.
func TestCollectionsWidenedThenRotatedOpenHandle(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			owner := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, owner.Grant(ctx, "bob", vault.Secret([]byte("b")), vault.RoleWriter, "notes"))
			bob := openPerson(t, personCfg(st, "bob", "b"))
			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-1", Note{Text: "limited"}))

			require.NoError(t, owner.SetCollections(ctx, "bob"))
			rot, err := owner.RotateKeys(ctx)
			require.NoError(t, err)
			require.NoError(t, rot.Wait(ctx))

			require.NoError(t, vault.CollectionOf[Note](bob, "notes").Put(ctx, "n-2", Note{Text: "widened"}))
			require.NoError(t, vault.CollectionOf[Note](bob, "payroll").Put(ctx, "p-1", Note{Text: "widened"}))
			got, err := vault.CollectionOf[Note](owner, "notes").Get(ctx, "n-2")
			require.NoError(t, err)
			assert.Equal(t, "widened", got.Text)
			got, err = vault.CollectionOf[Note](bob, "notes").Get(ctx, "n-1")
			require.NoError(t, err)
			assert.Equal(t, "limited", got.Text)
			verified(t, owner)
		})
	}
}
