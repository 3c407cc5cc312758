package ledger

import (
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/errs"
	"github.com/noydb-go/noydb/internal/pins"
)

// Errors of the audit ledger, as the vault's calls return them (wrapped: test
// them with errors.Is). The integrity problems that vault.Audit's Read and
// Verify find are the typed errors below, which carry the position at fault.
var (
	// ErrTampered: a stored ledger value failed authentication or does not
	// decode (changed, truncated, or copied from another position), or the
	// entries do not form the chain the head records. Every *TamperError,
	// *ChainError and *GapError matches it. It is crypto.ErrTampered (and
	// vault.ErrTampered, numbering.ErrTampered): one value everywhere.
	ErrTampered = crypto.ErrTampered
	// ErrContention: every attempt of a vault write's retry budget (16
	// commits) lost a race with another writer of the store, such as
	// vault.Vault.Update against another process. Nothing was written. It
	// does not match stores.ErrConflict, so an outer retry loop does not
	// multiply the budget. It is sequence.ErrContention: one value everywhere.
	ErrContention = errs.ErrContention
	// ErrInvalidEntry: an entry has an unknown kind or fields too long to
	// encode (Entry.MarshalBinary).
	ErrInvalidEntry = errors.New("invalid ledger entry")
	// ErrMalformed: bytes given to Entry.UnmarshalBinary, or a stored value
	// once opened, are not a canonical encoding. It is the one corrupt-data
	// error (numbering.ErrCorrupt, sequence.ErrCorrupt are the same value).
	ErrMalformed = errs.ErrCorrupt
	// ErrUnpinned: a write committed, its entries and records are in the
	// store, but the rollback pin of the ledger's new head could not be
	// saved in the vault's state folder (vault.Config.StateDir). It is
	// vault.ErrUnpinned; the error also wraps the cause (vault.ErrPinsNotSaved
	// when the folder failed).
	// A sequence takes it, from a transaction, as one that committed.
	ErrUnpinned = pins.ErrUnpinned
)

// GapError reports a position that should hold an entry but does not: the
// entries jump from Want-1 to Got, or (Got == 0) end before the head.
type GapError struct {
	// Want is the first missing position.
	Want uint64
	// Got is the position found in its place, or 0 when the entries end
	// before the head's position.
	Got uint64
}

// Is reports whether target is ErrTampered: a missing entry is tampering.
func (e *GapError) Is(target error) bool { return target == ErrTampered }

// Error describes the missing position.
func (e *GapError) Error() string {
	if e.Got == 0 {
		return fmt.Sprintf("ledger: entry %d missing", e.Want)
	}
	return fmt.Sprintf("ledger: entry %d missing (found %d next)", e.Want, e.Got)
}

// ChainError reports an entry whose MAC does not follow from its
// predecessor's, or a head whose MAC is not its last entry's: entries were
// dropped, reordered, re-chained or forged by someone without the MAC key.
type ChainError struct {
	// Seq is the position of the entry that breaks the chain; with Head set,
	// the position the head record claims.
	Seq uint64
	// Head is true when the head record, not entry Seq, fails to match.
	Head bool
}

// Is reports whether target is ErrTampered: a broken chain is tampering.
func (e *ChainError) Is(target error) bool { return target == ErrTampered }

// Error describes where the chain breaks.
func (e *ChainError) Error() string {
	if e.Head {
		return fmt.Sprintf("ledger: head does not match entry %d", e.Seq)
	}
	return fmt.Sprintf("ledger: hash chain broken at entry %d", e.Seq)
}

// TamperError reports a stored value that failed authentication or decoding.
// It matches ErrTampered, and unwraps to the underlying failure (the
// sealer's error, or a decoding error).
type TamperError struct {
	// Seq is the position of the entry, or 0 for the head record.
	Seq uint64
	// Err is the underlying failure.
	Err error
}

// Error names the value that failed authentication.
func (e *TamperError) Error() string {
	if e.Seq == 0 {
		return "ledger: head record failed authentication"
	}
	return fmt.Sprintf("ledger: entry %d failed authentication", e.Seq)
}

// Is reports whether target is ErrTampered.
func (e *TamperError) Is(target error) bool { return target == ErrTampered }

// Unwrap returns the underlying failure.
func (e *TamperError) Unwrap() error { return e.Err }

// errBatchTooLarge: one append's entries encode to more than
// maxBatchBytes. The vault's writers stay below it, so callers never see it.
var errBatchTooLarge = errors.New("ledger batch too large")

// errStaleHead: a fenced append (AppendAfter) expected a head that is no
// longer the ledger's head; the caller must derive its entries again.
var errStaleHead = errors.New("ledger head moved")

// integrity reports whether err is one of the integrity problems Read finds
// in the stored data (as opposed to an I/O or context error).
func integrity(err error) bool {
	var (
		g *GapError
		c *ChainError
		t *TamperError
		s *SignatureError
	)
	return errors.As(err, &g) || errors.As(err, &c) || errors.As(err, &t) || errors.As(err, &s)
}
