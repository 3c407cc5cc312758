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

// CheckID reports whether id can identify a record: non-empty, at most
// MaxIDLen bytes, without NUL.
func CheckID(id string) error {
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
