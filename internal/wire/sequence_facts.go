package wire

// SequenceEventKind says what happened to a series (see SequenceEvent).
type SequenceEventKind uint8

// The kinds of SequenceEvent.
const (
	// EventAllocated: Number was handed out (by Next, NextSerial, Claim or Bind).
	EventAllocated SequenceEventKind = iota + 1
	// EventSeeded: SeedTo moved the counter from From to Number.
	EventSeeded
	// EventVoided: Number was voided with Reason.
	EventVoided
	// EventDefined: the series' definition was stored (Reason: its text).
	EventDefined
	// EventClosed: the period ending Partition was closed at Number.
	EventClosed
)

// String returns the kind's name.
func (k SequenceEventKind) String() string {
	switch k {
	case EventAllocated:
		return "allocated"
	case EventSeeded:
		return "seeded"
	case EventVoided:
		return "voided"
	case EventDefined:
		return "defined"
	case EventClosed:
		return "closed"
	}
	return "unknown"
}

// SequenceEvent is one thing a sequence did, as its Journal is told and the
// vault records it in its audit ledger (a number allocated, a series seeded,
// a number voided).
type SequenceEvent struct {
	// Kind says what happened.
	Kind SequenceEventKind
	// Series and Partition name the counter (Partition in canonical text form,
	// nil when unpartitioned; shared between events, do not modify).
	Series    string
	Partition []string
	// Number is the number allocated or voided, or the value seeded to.
	Number uint64
	// From is the counter's value before an EventSeeded.
	From uint64
	// RequestID is the request id of a Claim allocation.
	RequestID string
	// Reason is the reason of an EventVoided, and of an EventAllocated
	// taken for a correction its CorrectionText.
	Reason string
}

// SequenceFactKind says what a SequenceFact records.
type SequenceFactKind uint8

// The facts of a History (the vault's audit ledger) about a series.
const (
	// FactAllocated: the number was issued (RequestID set for a Claim).
	FactAllocated SequenceFactKind = iota + 1
	// FactBound: a record was written carrying the number.
	FactBound
	// FactVoided: the issued number was cancelled.
	FactVoided
	// FactSeeded: the counter was moved forward from From to Number by SeedTo.
	FactSeeded
	// FactRecordDeleted: a record was deleted (Collection, ID; Number unused).
	// The history reports deletions of any record; Audit keeps those of
	// records that carried one of the series' numbers.
	FactRecordDeleted
	// FactCorrected: Number was corrected by the number Corrector of
	// another series (an allocation whose Reason is a CorrectionText
	// naming this series, partition and number).
	FactCorrected
	// FactClosed: the period ending the partition was closed, with Number
	// its last number (ClosePeriod). A counter found open after it was
	// replayed or deleted by the store.
	FactClosed
	// FactDefined: the series' definition was stored (SeriesDefined). It
	// concerns every partition of the series, so a History yields it
	// whatever partition it is asked about. A series found without a
	// definition after it had its definition deleted by the store.
	FactDefined
	// FactBrought: the numbers From+1..Number were issued on a device
	// before its vault joined this hub, and the join brought them here
	// (a SeriesSeeded entry whose Reason is SeedBroughtReason). They are
	// issued numbers, not skipped ones: they may be voided and corrected.
	// The counter was (or is about to be) seeded over them; the fact
	// moves nothing and is not held against the counter. One with a
	// RequestID brings a single number the device gave to a Claim of it.
	FactBrought
)

// SeedBroughtReason is the Reason of the SeriesSeeded entries a join
// writes on a hub for the numbers the joining device issued before (see
// FactBrought).
const SeedBroughtReason = "brought by a join: issued on a device before it joined"

// SequenceFact is one recorded event about a number of a series, as a
// History yields it.
type SequenceFact struct {
	// Seq is the fact's position in the history (dense, from 1, shared by
	// every series of the history).
	Seq uint64
	// Kind says what the fact records.
	Kind SequenceFactKind
	// Number is the number the fact is about (the new counter of a FactSeeded).
	Number uint64
	// From is, for FactSeeded, the counter before the seed.
	From uint64
	// Collection and ID name the record of a FactBound or FactRecordDeleted.
	Collection, ID string
	// Reason is the reason of a FactVoided.
	Reason string
	// RequestID is the request id of a FactAllocated by Claim, or of a
	// FactBrought of a number a device gave to a Claim.
	RequestID string
	// Corrector is, for FactCorrected, the correcting number.
	Corrector CorrectionRef
}
