// Package errs defines the sentinel errors that several packages return, once,
// so that errors.Is gives the same answer whichever package's name a caller
// tests against: sequence.ErrContention, ledger.ErrContention and
// cas.ErrExhausted are one value, and so on. Public packages export these
// values under their own names; users never import this package.
//
// crypto.ErrTampered, the one authentication failure, is defined in package
// crypto (the lowest package that needs it) and re-exported likewise.
package errs

import "errors"

var (
	// ErrCorrupt: stored or given bytes do not decode as the layout they
	// should follow (truncated, trailing bytes, an unknown version, a length
	// over its limit, a non-minimal varint, an inconsistent field).
	ErrCorrupt = errors.New("corrupt data: it does not decode")
	// ErrContention: every attempt of a retry budget lost a compare-and-swap
	// race with another writer. Nothing was written.
	ErrContention = errors.New("contention: retry budget exhausted")
	// ErrInvalid: an argument was rejected before anything was read or written.
	ErrInvalid = errors.New("invalid argument")
)
