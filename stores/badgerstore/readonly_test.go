package badgerstore_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// folderState lists every file of dir with its size and modification time.
func folderState(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		m[p] = info.ModTime().Format(time.RFC3339Nano) + " " + string(rune(info.Size()))
		return nil
	}))
	return m
}

// A read-only open reads what a writer left, writes nothing to the folder
// (so it works where the process may not write), shares the folder with
// other read-only opens, and refuses every write with stores.ErrReadOnly.
func TestReadOnlyOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := badgerstore.Open(dir, nil)
	require.NoError(t, err)
	_, err = w.Put(ctx, "k", []byte("v"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	before := folderState(t, dir)

	a, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	require.NoError(t, err)
	b, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	require.NoError(t, err, "two read-only opens share the folder")

	it, err := a.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", string(it.Value))
	it, err = b.Get(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", string(it.Value))

	_, err = a.Put(ctx, "k", []byte("x"))
	assert.ErrorIs(t, err, stores.ErrReadOnly)
	_, err = a.CompareAndSwap(ctx, "k", it.Version, []byte("x"))
	assert.ErrorIs(t, err, stores.ErrReadOnly)
	assert.ErrorIs(t, a.Delete(ctx, "k"), stores.ErrReadOnly)
	assert.ErrorIs(t, a.Update(ctx, func(stores.Tx) error { return nil }), stores.ErrReadOnly)

	// A writer cannot take the folder while readers hold it.
	_, err = badgerstore.Open(dir, nil)
	assert.ErrorIs(t, err, stores.ErrLocked)

	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	assert.Equal(t, before, folderState(t, dir), "a read-only open changes no file")

	it2, err := openGet(ctx, dir, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", it2, "the data is intact for the next writer")
}

func openGet(ctx context.Context, dir, key string) (string, error) {
	s, err := badgerstore.Open(dir, nil)
	if err != nil {
		return "", err
	}
	defer s.Close()
	it, err := s.Get(ctx, key)
	return string(it.Value), err
}

// A read-only open of a folder that holds no store fails and creates
// nothing there.
func TestReadOnlyOpenOfEmptyFolder(t *testing.T) {
	dir := t.TempDir()
	_, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	require.Error(t, err)
	entries, rerr := os.ReadDir(dir)
	require.NoError(t, rerr)
	assert.Empty(t, entries)
}

// TestMain lets a test run this binary as a writer that dies without
// closing its store.
func TestMain(m *testing.M) {
	if dir := os.Getenv("BADGERSTORE_TEST_DIE_IN"); dir != "" {
		s, err := badgerstore.Open(dir, nil)
		if err != nil {
			os.Exit(3)
		}
		if _, err := s.Put(context.Background(), "k", []byte("v")); err != nil {
			os.Exit(4)
		}
		os.Exit(0) // no Close: the folder is left as a crash leaves it
	}
	if dir := os.Getenv("BADGERSTORE_TEST_FILL_AND_DIE_IN"); dir != "" {
		os.Exit(fillAndDie(dir))
	}
	os.Exit(m.Run())
}

// A folder a writer left without closing needs a writer's recovery: a
// read-only open says so with ErrRecoveryNeeded, and after one read-write
// open the read-only open works and sees the write.
func TestReadOnlyOpenAfterCrash(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BADGERSTORE_TEST_DIE_IN="+dir)
	require.NoError(t, cmd.Run())

	_, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	require.ErrorIs(t, err, badgerstore.ErrRecoveryNeeded)

	got, err := openGet(context.Background(), dir, "k")
	require.NoError(t, err)
	assert.Equal(t, "v", got)
	s, err := badgerstore.Open(dir, &badgerstore.Options{ReadOnly: true})
	require.NoError(t, err)
	it, err := s.Get(context.Background(), "k")
	require.NoError(t, err)
	assert.Equal(t, "v", string(it.Value))
	require.NoError(t, s.Close())
}
