package pins

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrUnsafeFolder: the state folder, or a file in it, is not one this
// device's user alone controls (a symbolic link, not a folder, a folder
// owned by another user): the SDK refuses it rather than write rollback
// pins where someone else could read, replace or redirect them. Every
// *FolderError matches it.
var ErrUnsafeFolder = errors.New("state folder refused")

// FolderError says why a state folder, or a file in it, was refused. It
// matches ErrUnsafeFolder.
type FolderError struct {
	// Path is the folder or file refused.
	Path string
	// Reason says why.
	Reason string
}

// Error names the path and the reason.
func (e *FolderError) Error() string {
	return fmt.Sprintf("state folder: %s: %s", e.Path, e.Reason)
}

// Unwrap returns ErrUnsafeFolder.
func (e *FolderError) Unwrap() error { return ErrUnsafeFolder }

// currentUID is the user the state folder must belong to (a variable for
// the tests, which cannot give a folder another owner without root).
var currentUID = os.Geteuid

// prepareFolder makes dir ready to hold pins: created (mode 0700) when
// missing, its permissions tightened to 0700 when the user owns it, and
// refused with a *FolderError when it is a symbolic link, not a folder, or
// owned by another user (where the system tells owners apart).
func prepareFolder(dir string) error {
	if err := checkFolder(dir); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	return checkFolder(dir)
}

// checkFolder checks dir as prepareFolder does, without creating it: an
// error wrapping fs.ErrNotExist when it is missing.
func checkFolder(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("pins: %w", err)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return &FolderError{Path: dir, Reason: "is a symbolic link; give the folder's own path"}
	case !fi.IsDir():
		return &FolderError{Path: dir, Reason: "is not a folder"}
	}
	if reason := foreignOwner(fi); reason != "" {
		return &FolderError{Path: dir, Reason: reason}
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("pins: tighten %s to 0700: %w", dir, err)
		}
	}
	return nil
}

// openFile opens a file of the state folder without following a symbolic
// link at its path (refused with a *FolderError).
func openFile(path string, flag int) (*os.File, error) {
	fh, err := os.OpenFile(path, flag|oNoFollow, 0o600)
	if err != nil && isSymlinkErr(path, err) {
		return nil, &FolderError{Path: path, Reason: "is a symbolic link"}
	}
	return fh, err
}

// readFile reads a file of the state folder as os.ReadFile does, without
// following a symbolic link at its path.
func readFile(path string) ([]byte, error) {
	fh, err := openFile(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(fh)
}

// isSymlinkErr reports whether err, from opening path without following
// links, is there because path is a symbolic link.
func isSymlinkErr(path string, err error) bool {
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	fi, lerr := os.Lstat(path)
	return lerr == nil && fi.Mode()&fs.ModeSymlink != 0
}
