// Package seal declares the two keyed primitives the SDK's stores of state
// are built on, so that the ledger, the sequences and deferred numbering
// take the same interfaces from the vault instead of each declaring its
// own.
package seal

// Sealer encrypts and authenticates stored values, binding each to the
// store key it lives at, so that a value copied to another key fails to
// open. Open must fail for any value Seal did not make for that key.
// Implementations must be safe for concurrent use.
type Sealer interface {
	// Seal encrypts plaintext for storage at key. It must not keep
	// plaintext, whose buffer the caller may reuse.
	Seal(key string, plaintext []byte) ([]byte, error)
	// Open authenticates and decrypts a value stored at key.
	Open(key string, sealed []byte) ([]byte, error)
}

// MACer computes a keyed MAC. It must encode its parts unambiguously (as
// crypto.MACer does), return between 16 and 255 bytes, and be safe for
// concurrent use.
type MACer interface {
	// MAC returns the MAC of parts.
	MAC(parts ...[]byte) []byte
}

// MACAppender is a MACer that can append its MAC to a slice instead of
// returning a new one (crypto.MACer can): hot paths that hold one use it
// to chain without allocating.
type MACAppender interface {
	// AppendMAC appends MAC(parts...) to dst and returns the result.
	AppendMAC(dst []byte, parts ...[]byte) []byte
}
