package sequence

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

// Event is one thing a sequence did, as the vault records it in its audit
// ledger (a number allocated, a series seeded, a number voided).
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
