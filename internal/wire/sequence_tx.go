// Package wire connects the SDK's packages through functions they do not
// export: a package sets a variable here in its init, and its one caller
// asserts it to the function type both sides agree on. Nothing here is for
// applications.
package wire

// SequenceNextTx is set by package sequence to
//
//	func(ctx context.Context, q *sequence.Sequence, tx stores.Tx) (s sequence.Serial, check bool, err error)
//
// which takes the next number of q inside tx (the caller's store
// transaction, in a vault the ledger's batch), recording its journal event
// in tx. check reports that q's counter was not yet checked against its
// history: call SequenceCheck outside the transaction, then run it again.
var SequenceNextTx any

// SequenceCheck is set by package sequence to
//
//	func(ctx context.Context, q *sequence.Sequence) error
//
// which checks q's counter against its history, once per Service, so that
// SequenceNextTx can refuse a counter the store rolled back.
var SequenceCheck any
