// Package stores defines the contract every noydb storage backend implements.
//
// A store keeps opaque byte values under string keys. It never sees plaintext:
// the vault seals every value before it reaches a store. Each key carries a
// version that changes on every successful write, which is what
// compare-and-swap is checked against.
//
// # Contract
//
//   - Get of a missing key returns ErrNotFound.
//   - Put writes unconditionally and returns the new version.
//   - CompareAndSwap writes only when the key's current version equals the
//     expected one; expected version 0 means "the key must not exist". On a
//     mismatch it returns ErrConflict and writes nothing.
//   - A successful write gives the key a nonzero version that it never had
//     before, so a stale expected version can never match again.
//   - Delete of a missing key is not an error.
//   - List yields the items whose keys start with a prefix, in ascending
//     byte order of their keys.
//   - Every method of a closed store returns ErrClosed; a cancelled context
//     makes a call return the context's error without writing.
//   - Keys are arbitrary non-empty strings of at most MaxKeyLen bytes and may
//     hold any byte, NUL and '/' included; values may be up to MaxValueLen bytes.
//
// Stores that can commit several keys atomically also implement Transactor.
// The conformance suite in package storetest checks all of this.
package stores

import (
	"context"
	"iter"
)

// Limits every store accepts. Larger keys or values are rejected with ErrInvalidKey
// or ErrTooLarge.
const (
	// MaxKeyLen is the longest key, in bytes, a store must accept.
	MaxKeyLen = 2048
	// MaxValueLen is the largest value, in bytes, a store must accept.
	MaxValueLen = 4 << 20
)

// Item is one stored key with its value and version.
type Item struct {
	// Key is the item's key.
	Key string
	// Value is the stored value (sealed by the vault: opaque to the store).
	Value []byte
	// Version is the key's current version, what CompareAndSwap checks.
	Version uint64
}

// Capabilities says what a store can guarantee.
type Capabilities struct {
	// CASAtomic is true when CompareAndSwap is atomic against every other writer
	// of the store, in this process and in any other. Gap-free allocation needs it.
	CASAtomic bool
	// Transactions is true when the store implements Transactor.
	Transactions bool
	// Durable is true when an acknowledged write survives a process or machine crash.
	Durable bool
	// Shared is true when several processes or machines can use the store at once.
	Shared bool
}

// Store is the contract every backend implements. Implementations are safe for
// concurrent use.
type Store interface {
	// Get returns the item at key, or ErrNotFound.
	Get(ctx context.Context, key string) (Item, error)
	// Put writes value at key unconditionally and returns its new version.
	Put(ctx context.Context, key string, value []byte) (uint64, error)
	// CompareAndSwap writes value at key only if the key's version is expected
	// (0: the key must not exist), returning the new version, or ErrConflict.
	CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error)
	// Delete removes key. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List yields the items whose keys start with prefix, in ascending key order.
	// An error ends the sequence: it is yielded once with a zero Item.
	// The loop body may call the store, writes included. List need not be a
	// snapshot: a key written or deleted during the iteration may or may not
	// be seen, but a key that exists throughout is yielded exactly once.
	List(ctx context.Context, prefix string) iter.Seq2[Item, error]
	// Capabilities reports what the store guarantees.
	Capabilities() Capabilities
	// Close releases the store. Later calls return ErrClosed. Close is idempotent.
	Close() error
}

// Transactor is implemented by stores that can commit several keys atomically.
type Transactor interface {
	// Update runs fn in a read-write transaction. If fn returns nil the
	// transaction commits; otherwise it is rolled back and fn's error returned.
	// If another writer changed a key the transaction read or wrote, Update
	// returns ErrConflict and nothing is written; the caller may run it again.
	// fn must not keep tx after it returns, and may be called only once per Update.
	Update(ctx context.Context, fn func(tx Tx) error) error
}

// Tx is a read-write transaction handed to the closure of Transactor.Update.
// Reads see the transaction's own writes. A Tx is not safe for concurrent use.
type Tx interface {
	// Get returns the item at key, or ErrNotFound. On a shared store it locks
	// the key (or records it for conflict detection) until the transaction ends.
	// For a key this transaction has written, the Version is unspecified (the
	// new version is only known at commit).
	Get(key string) (Item, error)
	// Put writes value at key.
	Put(key string, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key string) error
}

// Locker is implemented by stores that can hold a named exclusive lock for
// every user of the store (filestore: every process on this machine;
// badgerstore, which one process opens at a time: every user in that
// process; pgstore: every process on every machine using the database).
// A lock is released by its unlock function, or when its holder dies (its
// process ends, or, on pgstore, its connection to the server breaks).
//
// Writers that would otherwise race by compare-and-swap or optimistic
// transactions, such as the ledgers of two DBs on one store, take turns
// under it instead of spending a retry budget: for them the lock only
// spares retries, and correctness never depends on it. A deferred-numbering
// pass try-locks its series with it, so that one pass runs at a time across
// every user the lock covers.
type Locker interface {
	// Lock waits for the lock called name and returns the function that
	// releases it (calling it again does nothing). It returns ctx's error if
	// ctx ends first.
	Lock(ctx context.Context, name string) (unlock func(), err error)
	// TryLock takes the lock called name if it is free, without waiting for
	// another holder, and returns the function that releases it; it returns
	// ErrLockHeld when another holder has the lock.
	TryLock(ctx context.Context, name string) (unlock func(), err error)
}

// Prefetcher is implemented by a Tx that can read several keys in one step,
// such as pgstore's, where each read of a new key is a round trip to the
// server. A caller that knows the keys a transaction will read calls
// Prefetch first; the later Gets of those keys are then answered without
// another trip. Prefetch reads (and, on a shared store, locks or claims) the
// keys in ascending byte order whatever order they are given in, so two
// transactions that prefetch the keys they share cannot deadlock on them.
// Duplicate keys are allowed. An error spoils the transaction like a failed
// Get. Stores whose reads are cheap do not implement it; callers skip it then.
type Prefetcher interface {
	// Prefetch reads keys into the transaction, in ascending byte order.
	Prefetch(keys []string) error
}
