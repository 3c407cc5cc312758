package sequence

import (
	"context"

	"github.com/noydb-go/noydb/stores"
)

// Sealer seals and opens the values a sequence stores; each sealed value is bound to its store key.
// Implementations must be safe for concurrent use.
type Sealer interface {
	Seal(key string, plaintext []byte) ([]byte, error)
	Open(key string, sealed []byte) ([]byte, error)
}

// Journal records what a sequence does, for the audit ledger. When the store has transactions, Record is called
// inside the same transaction that writes the counter (tx non-nil) and an error aborts the allocation; otherwise it is
// called after the CAS commits with tx == nil.
//
// Record may be called again with the same events when the transaction is
// retried after a conflict; only the events of the attempt that commits are
// real. It must not keep tx or modify events, and must be safe for concurrent
// use (it is called for different series at once).
type Journal interface {
	Record(ctx context.Context, tx stores.Tx, events []Event) error
}

// EventKind says what happened to a series.
type EventKind uint8

// The kinds of Event.
const (
	// Allocated: Number was handed out (by Next, NextSerial, Claim or Bind).
	Allocated EventKind = iota + 1
	// Seeded: SeedTo moved the counter from From to Number.
	Seeded
	// Voided: Number was voided with Reason.
	Voided
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case Allocated:
		return "allocated"
	case Seeded:
		return "seeded"
	case Voided:
		return "voided"
	}
	return "unknown"
}

// Event is one thing a sequence did, as told to the Journal.
type Event struct {
	Kind EventKind
	// Series and Partition name the counter (Partition in canonical text form,
	// nil when unpartitioned; shared between events, do not modify).
	Series    string
	Partition []string
	// Number is the number allocated or voided, or the value seeded to.
	Number uint64
	// From is the counter's value before a Seeded event.
	From uint64
	// RequestID is the request id of a Claim allocation.
	RequestID string
	// Reason is the reason of a Voided event.
	Reason string
}
