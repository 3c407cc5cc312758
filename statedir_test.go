package noydb_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// takeN takes n numbers of series "inv" in vault "books" and closes the DB.
func takeN(t testing.TB, st stores.Store, dir string, n int) {
	t.Helper()
	ctx := context.Background()
	db := openWithState(t, st, dir)
	seq, err := openVault(t, db, "books").Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	for range n {
		_, err := seq.Next(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
}

// A store that deletes every key does not get the vault silently re-created
// on a device that has used it; ForgetVault is the explicit way to start over.
func TestWipedVaultIsNotRecreated(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, dir := newAdv(t), t.TempDir()
			takeN(t, adv.Store(), dir, 3)
			_, err := adv.Wipe(ctx)
			require.NoError(t, err)

			db := openWithState(t, adv.Store(), dir)
			_, err = db.OpenVault(ctx, "books")
			assert.ErrorIs(t, err, noydb.ErrVaultLost)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			keys, err := adv.Keys(ctx, "")
			require.NoError(t, err)
			assert.Empty(t, keys, "nothing was created")

			// In the same process, while the first DB still has it open.
			liveDir := t.TempDir()
			live := openWithState(t, adv.Store(), liveDir)
			_ = openVault(t, live, "books")
			_, err = adv.Wipe(ctx)
			require.NoError(t, err)
			_, err = openWithState(t, adv.Store(), liveDir).OpenVault(ctx, "books")
			assert.ErrorIs(t, err, noydb.ErrVaultLost)
			require.NoError(t, live.Close())

			// Explicitly: forget, then the vault starts over at 1.
			require.NoError(t, db.ForgetVault(ctx, "books"))
			seq, err := openVault(t, db, "books").Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			n, err := seq.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
			assert.Error(t, db.ForgetVault(ctx, "books"), "not while open")
		})
	}
}

// A store that replaces the vault's header (and keyring) with those of
// another vault of the same name is refused before any key derivation.
func TestReplacedHeaderIsVaultLost(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, dir := newAdv(t), t.TempDir()
			takeN(t, adv.Store(), dir, 3)

			// Another vault "books", same user and secret, another salt.
			other := memstore.New()
			takeN(t, other, "", 1)
			for k, v := range snapshot(t, other) {
				require.NoError(t, adv.Set(ctx, k, []byte(v)))
			}

			_, err := openWithState(t, adv.Store(), dir).OpenVault(ctx, "books")
			assert.ErrorIs(t, err, noydb.ErrVaultLost)
			assert.ErrorIs(t, err, noydb.ErrRollback)

			// Only the header replaced: the same answer.
			adv2, dir2 := newAdv(t), t.TempDir()
			takeN(t, adv2.Store(), dir2, 1)
			it, err := other.Get(ctx, "v/books/_header")
			require.NoError(t, err)
			require.NoError(t, adv2.Set(ctx, "v/books/_header", it.Value))
			_, err = openWithState(t, adv2.Store(), dir2).OpenVault(ctx, "books")
			assert.ErrorIs(t, err, noydb.ErrVaultLost)

			// Without a state folder the device has no memory of the salt:
			// the key slot, bound to the header it was made with, no longer
			// opens, and nothing is written.
			before := snapshot(t, adv2.Store())
			_, err = openWithState(t, adv2.Store(), "").OpenVault(ctx, "books")
			assert.ErrorIs(t, err, noydb.ErrWrongSecret)
			assert.Equal(t, before, snapshot(t, adv2.Store()))
		})
	}
}

// Deleted or unreadable pins of a vault this device has used are an error,
// not a fresh start without protection.
func TestDeletedPinsAreStateLost(t *testing.T) {
	for name, damage := range map[string]func(path string) error{
		"deleted": os.Remove,
		"garbage": func(p string) error { return os.WriteFile(p, []byte("garbage"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, dir := memstore.New(), t.TempDir()
			takeN(t, st, dir, 4)
			files, err := filepath.Glob(filepath.Join(dir, "*.pins"))
			require.NoError(t, err)
			require.NotEmpty(t, files)
			for _, f := range files {
				require.NoError(t, damage(f))
			}

			db := openWithState(t, st, dir)
			_, err = db.OpenVault(ctx, "books")
			assert.ErrorIs(t, err, noydb.ErrStateLost)

			require.NoError(t, db.ForgetVault(ctx, "books"))
			seq, err := openVault(t, db, "books").Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			n, err := seq.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(5), n, "the store's own vault, adopted again")
		})
	}
}

// One StateDir for two stores that both hold a vault "books" looks, to the
// second, like a replaced vault: the documented rule is one StateDir per store.
func TestOneStateDirPerStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	takeN(t, memstore.New(), dir, 1)
	_, err := openWithState(t, memstore.New(), dir).OpenVault(ctx, "books")
	assert.ErrorIs(t, err, noydb.ErrVaultLost)
	// Its own StateDir: no alarm.
	takeN(t, memstore.New(), t.TempDir(), 1)
}

// Without a StateDir the device keeps no memory between processes: a wiped
// store gets a new vault. This is the documented limit.
func TestWipeWithoutStateDirStartsOver(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memstore.New())
	takeN(t, adv.Store(), "", 3)
	_, err := adv.Wipe(ctx)
	require.NoError(t, err)
	seq, err := openVault(t, openWithState(t, adv.Store(), ""), "books").Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	n, err := seq.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), n)
}
