package vault

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name limits.
const (
	// MaxNameLen is the longest vault or collection name, in bytes.
	MaxNameLen = 128
	// MaxIDLen is the longest record id, in bytes.
	MaxIDLen = 512
)

// CheckVaultName reports whether name can name a vault: non-empty, at most
// MaxNameLen bytes, valid UTF-8, without '/', NUL or any other control
// character (newlines included), and not starting with '_'. A bad name gives
// an error wrapping ErrInvalidName (ErrReservedName for the leading '_').
func CheckVaultName(name string) error {
	return checkName("vault", name)
}

// CheckCollectionName reports whether name can name a collection. Names starting
// with '_' are reserved (ErrReservedName); otherwise the rules of CheckVaultName apply.
func CheckCollectionName(name string) error {
	return checkName("collection", name)
}

func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty: %w", what, ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%s name is longer than %d bytes: %w", what, MaxNameLen, ErrInvalidName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s name %q is not valid UTF-8: %w", what, name, ErrInvalidName)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%s name %q holds a control character: %w", what, name, ErrInvalidName)
	case strings.ContainsRune(name, '/'):
		return fmt.Errorf("%s name %q holds '/': %w", what, name, ErrInvalidName)
	case name[0] == '_':
		return fmt.Errorf("%s name %q starts with '_': %w", what, name, ErrReservedName)
	}
	return nil
}

// CheckID reports whether id can identify a new record: non-empty, at
// most MaxIDLen bytes, valid UTF-8, without NUL or any other control
// character (newlines included). A bad id gives an error wrapping
// ErrInvalidName, and a write under it writes nothing.
//
// Releases before this rule accepted any id without NUL: a record stored
// under an id this rule refuses stays readable and deletable (Get, List,
// Delete and the other calls that write no new revision check only what
// those releases did), but takes no new revision.
func CheckID(id string) error {
	if err := checkStoredID(id); err != nil {
		return err
	}
	switch {
	case !utf8.ValidString(id):
		return fmt.Errorf("record id %q is not valid UTF-8: %w", id, ErrInvalidName)
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return fmt.Errorf("record id %q holds a control character: %w", id, ErrInvalidName)
	}
	return nil
}

// checkStoredID reports whether id can name a record already stored: the
// rule of the releases before CheckID's (non-empty, at most MaxIDLen
// bytes, without NUL), for the calls that read or delete a record.
func checkStoredID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("record id is empty: %w", ErrInvalidName)
	case len(id) > MaxIDLen:
		return fmt.Errorf("record id is longer than %d bytes: %w", MaxIDLen, ErrInvalidName)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("record id %q holds NUL: %w", id, ErrInvalidName)
	}
	return nil
}

// checkIDFor checks id for the call op: CheckID for a call that writes a
// new revision, checkStoredID for one that reads or deletes.
func checkIDFor(op, id string) error {
	switch op {
	case "put", "put numbered", "update", "put many":
		return CheckID(id)
	}
	return checkStoredID(id)
}
