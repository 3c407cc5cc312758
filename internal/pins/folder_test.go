//go:build unix

package pins_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/pins"
)

// refused asserts that err refuses path for reason words, as a
// *pins.FolderError matching ErrUnsafeFolder.
func refused(t *testing.T, err error, path string) {
	t.Helper()
	require.ErrorIs(t, err, pins.ErrUnsafeFolder)
	var fe *pins.FolderError
	require.True(t, errors.As(err, &fe), "%v", err)
	assert.Equal(t, path, fe.Path)
	assert.NotEmpty(t, fe.Reason)
}

// A state folder that is a symbolic link is refused, by Open, Lookup and
// Forget, with the reason; nothing is written where it points.
func TestFolderSymlinkRefused(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Symlink(real, link))
	_, err := openPins(link, "books", testID, newKey(t))
	refused(t, err, link)
	_, err = pins.Lookup(link, "books")
	refused(t, err, link)
	refused(t, pins.Forget(link, "books"), link)
	ents, err := os.ReadDir(real)
	require.NoError(t, err)
	assert.Empty(t, ents, "nothing written through the link")
}

// A folder owned by another user is refused; the user's own folder with
// loose permissions is tightened to 0700, and a new one is made 0700.
func TestFolderOwnerAndPermissions(t *testing.T) {
	loose := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(loose, 0o755))
	require.NoError(t, os.Chmod(loose, 0o755)) // whatever the umask
	open(t, loose, newKey(t))
	fi, err := os.Stat(loose)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "tightened")

	fresh := filepath.Join(t.TempDir(), "a", "b")
	open(t, fresh, newKey(t))
	fi, err = os.Stat(fresh)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "made 0700")

	theirs := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(theirs, 0o755))
	require.NoError(t, os.Chmod(theirs, 0o755))
	restore := pins.SetCurrentUID(os.Geteuid() + 1) // the folder is then someone else's
	_, err = openPins(theirs, "books", testID, newKey(t))
	refused(t, err, theirs)
	_, err = pins.Lookup(theirs, "books")
	refused(t, err, theirs)
	restore()
	fi, err = os.Stat(theirs)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "another user's folder is left as it is")
}

// A symbolic link at the path of a pins copy is not followed: the write
// is refused and the file it points to is left as it was. One at the path
// of the temporary file of the vault's record is removed, not written
// through.
func TestPinsFilesDoNotFollowLinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(outside, []byte("precious"), 0o600))

	// The first open writes copy a and the record through its .tmp.
	probe := t.TempDir()
	open(t, probe, newKey(t))
	ents, err := os.ReadDir(probe)
	require.NoError(t, err)
	var slotA, record string
	for _, e := range ents {
		switch filepath.Ext(e.Name()) {
		case ".pins":
			if slotA == "" {
				slotA = e.Name()
			}
		case ".vault":
			record = e.Name()
		}
	}
	require.NotEmpty(t, slotA)
	require.NotEmpty(t, record)

	require.NoError(t, os.Symlink(outside, filepath.Join(dir, record+".tmp")))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, slotA)))
	_, err = openPins(dir, "books", testID, newKey(t))
	refused(t, err, filepath.Join(dir, slotA))
	b, err := os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))

	require.NoError(t, os.Remove(filepath.Join(dir, slotA)))
	open(t, dir, newKey(t))
	b, err = os.ReadFile(outside)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b), "the temporary file's link is not written through")
	fi, err := os.Lstat(filepath.Join(dir, record))
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())
}
