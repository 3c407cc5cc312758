package hostilehub_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/vault"
)

// TestSplitViewHub: a hub shows devices A and B two histories of one vault
// from one moment on (a split view). While the views differ each gives
// the numbers after that moment on its own: A and B both take number 3,
// and neither can tell (each sees a history that holds together). The
// first moment B can tell is its first call that reaches the hub once the
// hub serves it A's history again, even when that history has grown past
// what B saw: a number, a sync, and after a restart (the hub's head is
// pinned in B's state folder) its first call too. Each fails with
// ErrRollback and takes nothing.
func TestSplitViewHub(t *testing.T) {
	eachSetup(t, func(t *testing.T, s setup) {
		ctx := context.Background()
		split := newSplitHub(s.hub.Store())
		dirB := t.TempDir()
		a := openDevice(t, s.newDevice(t), s.hub.Store(), deviceOpts{stateDir: t.TempDir()})
		devB := s.newDevice(t)
		b := openDevice(t, devB, split, deviceOpts{stateDir: dirB})
		assert.Equal(t, []uint64{1}, take(t, a, "orders", 1))
		assert.Equal(t, []uint64{2}, take(t, b, "orders", 1))
		mustSync(t, a)
		mustSync(t, b)

		other := fork(t, s.hub, s.newHub)
		split.Serve(other.Store())
		assert.Equal(t, []uint64{3}, take(t, a, "orders", 1), "A's view")
		assert.Equal(t, []uint64{3}, take(t, b, "orders", 1), "B's view: 3 again, and B cannot tell")
		// A's history grows past what B saw.
		assert.Equal(t, []uint64{4, 5}, take(t, a, "orders", 2))
		require.NoError(t, vault.CollectionOf[Note](a, "notes").Put(ctx, "n", Note{"after the split"}))
		mustSync(t, a)

		split.Serve(s.hub.Store())
		q, err := b.Sequence("orders", sequenceOptions())
		require.NoError(t, err)
		_, err = q.Next(ctx)
		require.ErrorIs(t, err, vault.ErrRollback, "B's first number")
		_, err = b.Sync(ctx)
		require.ErrorIs(t, err, vault.ErrRollback, "B's sync")
		require.NoError(t, b.Close())

		b = openDevice(t, devB, split, deviceOpts{stateDir: dirB})
		q, err = b.Sequence("orders", sequenceOptions())
		require.NoError(t, err)
		_, err = q.Next(ctx)
		require.ErrorIs(t, err, vault.ErrRollback, "B's first number after a restart")
		assert.Equal(t, []uint64{6}, take(t, a, "orders", 1), "nothing taken by B's refused calls")
	})
}
