package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stateApp is an app whose per-user state and configuration folders are
// temporary ones; it returns the state folder.
func stateApp(t *testing.T, store, root string) (*app, string) {
	t.Helper()
	cfg, state := t.TempDir(), t.TempDir()
	return &app{storeSpec: store, stateRoot: root, io: stdio{
		lookupEnv:     func(string) (string, bool) { return "", false },
		userConfigDir: func() (string, error) { return cfg, nil },
		userStateDir:  func() (string, error) { return state, nil },
	}}, state
}

func TestStateDirPerStore(t *testing.T) {
	t.Chdir(t.TempDir())
	wd, err := os.Getwd()
	require.NoError(t, err)

	a, cfg := stateApp(t, "badger:./data", "")
	dir, err := a.stateDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(cfg, "noydb"), filepath.Dir(dir), "under the user's state folder")

	// The same store however it is written: the same folder.
	a.storeSpec = "badger:" + filepath.Join(wd, "data")
	same, err := a.stateDir()
	require.NoError(t, err)
	assert.Equal(t, dir, same)

	// Another store, or another kind on the same folder: another folder.
	for _, other := range []string{"badger:./data2", "file:./data"} {
		a.storeSpec = other
		d, err := a.stateDir()
		require.NoError(t, err)
		assert.NotEqual(t, dir, d, other)
	}

	// PostgreSQL: the server, database and schema; not who connects.
	a.storeSpec = "postgres://u:pw@DB.example:5432/books?sslmode=disable"
	pg, err := a.stateDir()
	require.NoError(t, err)
	a.storeSpec = "postgres://other@db.example/books?schema=noydb"
	pg2, err := a.stateDir()
	require.NoError(t, err)
	assert.Equal(t, pg, pg2)
	a.storeSpec = "postgres://db.example/books?schema=eu"
	pg3, err := a.stateDir()
	require.NoError(t, err)
	assert.NotEqual(t, pg, pg3)

	// mem: keeps none.
	a.storeSpec = "mem:"
	none, err := a.stateDir()
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestStateDirRoot(t *testing.T) {
	root := t.TempDir()
	a, cfg := stateApp(t, "badger:/x/data", root)
	dir, err := a.stateDir()
	require.NoError(t, err)
	assert.Equal(t, root, filepath.Dir(dir), "--state-dir is the root")
	assert.NotContains(t, dir, cfg)

	// No user folder and no --state-dir: a clear error, not the current folder.
	a, _ = stateApp(t, "badger:/x/data", "")
	a.io.userStateDir = func() (string, error) { return "", errors.New("$HOME is not defined") }
	_, err = a.stateDir()
	assert.ErrorContains(t, err, "--state-dir")
}

// A store whose state an earlier release kept in the configuration folder
// keeps it there: moving would forget the pins and the vaults it used.
func TestStateDirLegacyKept(t *testing.T) {
	a, state := stateApp(t, "badger:/x/data", "")
	dir, err := a.stateDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(state, "noydb"), filepath.Dir(dir))

	cfg, err := a.io.userConfigDir()
	require.NoError(t, err)
	legacy := filepath.Join(cfg, "noydb", "state", filepath.Base(dir))
	require.NoError(t, os.MkdirAll(legacy, 0o700))
	got, err := a.stateDir()
	require.NoError(t, err)
	assert.Equal(t, legacy, got)

	// Another store has no legacy folder: the new place.
	a.storeSpec = "badger:/x/other"
	got, err = a.stateDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(state, "noydb"), filepath.Dir(got))
}

// A store reached through a symbolic link has one state folder before and
// after its folder exists: 'noydb init' names the state folder before it
// creates the store, and every later command must find the pins it left.
func TestStateDirSameBeforeAndAfterTheStoreExists(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	require.NoError(t, os.Mkdir(real, 0o700))
	if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	for _, store := range []string{"badger:" + filepath.Join(base, "link", "store"), "file:" + filepath.Join(base, "link", "a", "b")} {
		a, _ := stateApp(t, store, "")
		before, err := a.stateDir()
		require.NoError(t, err)
		spec, err := parseStoreSpec(store)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(spec.dir, 0o700))
		after, err := a.stateDir()
		require.NoError(t, err)
		assert.Equal(t, before, after, store)

		// And the same as the store named by its real folder.
		a.storeSpec = spec.kind + ":" + filepath.Join(real, strings.TrimPrefix(spec.dir, filepath.Join(base, "link")))
		direct, err := a.stateDir()
		require.NoError(t, err)
		assert.Equal(t, after, direct, store)
	}
}
