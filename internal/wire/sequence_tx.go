// Package wire connects the SDK's packages through functions they do not
// export: a package sets a variable here in its init, and its one caller
// asserts it to the function type both sides agree on. Nothing here is for
// applications.
package wire

import "errors"

// SequenceNextTx is set by package sequence to
//
//	func(ctx context.Context, q *sequence.Sequence, tx stores.Tx, pinned *uint64, checked bool) (s sequence.Serial, check bool, err error)
//
// which takes the next number of q inside tx (the caller's store
// transaction, in a vault the ledger's batch), recording its journal event
// in tx. check reports that q's counter was not yet checked against its
// history, or that another writer moved the history since the check:
// call SequenceCheck outside the transaction, then run it again. checked
// says that the caller did so for q in an earlier run of the same call:
// the history moving again meanwhile then asks for no further check (an
// honest busy history would otherwise ask on every run).
// pinned is the counter's rollback pin taken with SequencePin before tx
// began, or nil to read it inside tx. An err matching ErrTxStale (only
// when pinned is nil) is a rollback that a snapshot older than the pin may
// explain: run the transaction again with the pin taken before it. An err
// matching ErrTxWrote means q wrote into tx before failing: tx must not
// commit.
var SequenceNextTx any

// SequencePin is set by package sequence to
//
//	func(q *sequence.Sequence) uint64
//
// which returns the rollback pin of q's counter now (see SequenceNextTx).
var SequencePin any

// SequenceOwner is set by package sequence to
//
//	func(q *sequence.Sequence) any
//
// which returns the value NewSequences returned for the vault handle q was
// obtained from, so that a vault can tell its own sequences from those of
// another handle on the same vault (another DB), whose keys look the same.
var SequenceOwner any

// Marks of the errors of SequenceNextTx.
var (
	// ErrTxStale: refused as a rollback on a pin read inside the
	// transaction; decided by running it again with the pin taken before.
	ErrTxStale = errors.New("counter below a pin read inside the transaction")
	// ErrTxWrote: the call wrote into the transaction before it failed.
	ErrTxWrote = errors.New("failed after writing into the transaction")
)

// SequenceCheck is set by package sequence to
//
//	func(ctx context.Context, q *sequence.Sequence) error
//
// which checks q's counter against its history, once per Service, so that
// SequenceNextTx can refuse a counter the store rolled back.
var SequenceCheck any

// SequenceTarget is set by package sequence to
//
//	func(q *sequence.Sequence) *sequence.Sequence
//
// which returns the handle of the counter q's next number is taken from
// (for a series with periods, the counter of the period of q's date or of
// now), the same value for the same counter, without reading the store:
// q itself while its series' definition is not loaded yet (SequenceNextTx
// then asks for SequenceCheck, which loads it).
var SequenceTarget any
