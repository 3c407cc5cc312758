package stores

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors shared by every store. Stores translate their driver's errors
// into these, so callers test them with errors.Is whatever the backend.
var (
	// ErrNotFound: the key does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a compare-and-swap or transaction lost to another writer.
	ErrConflict = errors.New("conflict: the key was changed by another writer")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store is closed")
	// ErrNotSupported: the store cannot do what was asked.
	ErrNotSupported = errors.New("not supported by this store")
	// ErrLocked: the store's files are held by another process.
	ErrLocked = errors.New("store is locked by another process")
	// ErrReadOnly: the store was opened read-only, so it refuses writes.
	ErrReadOnly = errors.New("store is open read-only")
	// ErrLockHeld: Locker.TryLock found the lock held by another holder.
	ErrLockHeld = errors.New("lock is held by another holder")
	// ErrInvalidKey: the key is empty or longer than MaxKeyLen.
	ErrInvalidKey = errors.New("invalid key")
	// ErrTooLarge: the value is longer than MaxValueLen.
	ErrTooLarge = errors.New("value too large")
	// ErrMisbehaving: the store broke its contract in a way the caller can
	// see, such as a List that yields a key outside the asked prefix. Nothing
	// is trusted from that answer.
	ErrMisbehaving = errors.New("store broke its contract")
	// ErrUnavailable: the store could not be reached (a network store's
	// server is down or unreachable, the connection broke). It is not an
	// answer of the store: the call may be tried again later. A connection
	// lost during a commit leaves the commit's outcome unknown.
	ErrUnavailable = errors.New("store unavailable: it could not be reached")
)

// CheckListed returns an error wrapping ErrMisbehaving unless key, yielded
// by a List of prefix, starts with prefix. Callers that slice the prefix off
// listed keys call it first, so a misbehaving store gets an error, not a panic.
func CheckListed(prefix, key string) error {
	if !strings.HasPrefix(key, prefix) {
		return fmt.Errorf("list %q yielded key %q: %w", prefix, key, ErrMisbehaving)
	}
	return nil
}

// CheckKey returns ErrInvalidKey if key is empty or longer than MaxKeyLen.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return ErrInvalidKey
	}
	return nil
}

// CheckValue returns ErrTooLarge if value is longer than MaxValueLen.
func CheckValue(value []byte) error {
	if len(value) > MaxValueLen {
		return ErrTooLarge
	}
	return nil
}
