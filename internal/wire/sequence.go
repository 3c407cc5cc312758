package wire

import (
	"context"

	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/stores"
)

// NewSequences is set by package sequence to its constructor, of type
//
//	func(store stores.Store, sealer seal.Sealer, prefix string,
//		cfg wire.SequenceConfig) wire.Sequences[*sequence.Sequence, sequence.Options]
//
// which returns the sequences of one vault, whose counters live in store
// under prefix+"_sequences/…", every value sealed with sealer. It panics if
// store or sealer is nil.
var NewSequences any

// SequenceConfig tunes the sequences of a vault. The zero value means the
// documented defaults.
type SequenceConfig struct {
	// Journal, if set, is told about every allocation, seed and void (nil = none).
	Journal Journal
	// MaxAttempts bounds the compare-and-swap writes tried for one batch
	// before giving up with a *sequence.ContentionError; 0 means 16. A batch
	// written in a transaction of the vault's ledger is not retried here: the
	// ledger's one budget (LedgerOptions.MaxAttempts) bounds it, and its
	// exhaustion matches sequence.ErrContention without being a
	// *sequence.ContentionError.
	MaxAttempts int
	// ClaimWindow is how many recent request ids each counter remembers on a
	// store without transactions; 0 means sequence.DefaultClaimWindow. Claims
	// with an id older than the window fail with sequence.ErrRequestExpired.
	ClaimWindow int
	// History, if set, lets Sequence.Audit account for every number.
	History History
	// Pins, if set, remembers outside the store the highest value this device
	// has seen per counter, so that a store serving an older counter (a
	// restored snapshot) fails allocation instead of re-issuing numbers.
	Pins pins.Counter
	// PassHead, if set, returns the last number the deferred-numbering
	// passes of series gave (their head; 0 when none). A series has one
	// head for both paths: a pass raises the series' unpartitioned counter
	// in the commit of its batch, so the counter is normally at or above
	// it. One that is not (passes of a version before one head per
	// series, or a pass on a store without transactions cut between its
	// counter and its head) is raised to it before its next number: it is
	// read once per counter and process, with the check of the counter
	// against the History, and by Audit. It must not be called inside a
	// store transaction.
	PassHead func(ctx context.Context, series string) (uint64, error)
	// ClaimMAC, if set, keys claim records by a keyed MAC of the request id
	// instead of the id, so the store does not see request ids. It must stay
	// the same for the life of the counters (the vault derives it from its
	// data key).
	ClaimMAC seal.MACer
}

// Journal records what the sequences do, for the audit ledger. When the
// store has transactions, Record is called inside the same transaction that
// writes the counter (tx non-nil) and an error aborts the allocation;
// otherwise it is called after the compare-and-swap commits, with tx nil.
//
// Record may be called again with the same events when the transaction is
// retried after a conflict; only the events of the attempt that commits are
// real. It must not keep tx or modify events, and must be safe for
// concurrent use (it is called for different series at once).
type Journal interface {
	// Record records events (see above).
	Record(ctx context.Context, tx stores.Tx, events []SequenceEvent) error
}

// History gives the sequences the recorded facts about their numbers (the
// vault's audit ledger): for Audit, for the check that a counter is not
// behind what the history recorded, for Claim when a claim record has gone,
// and for Void.
type History interface {
	// Facts calls fn, in the order they were recorded, for every fact about
	// the numbers of series and partition recorded after position after (0:
	// from the start) up to the end of the history as it was when the walk
	// began, and returns the position of that end (after itself when nothing
	// was recorded since). Positions are those of SequenceFact.Seq. An
	// error from fn stops the walk and is returned.
	Facts(ctx context.Context, series string, partition []string, after uint64, fn func(SequenceFact) error) (through uint64, err error)
}

// HistorySummary is a History that also keeps a summary of the facts the
// check of a counter needs, bound to the history's head (the vault's
// ledger summary, see ledger.FactKind): asking it reads only what was
// recorded since the summary's position, not the whole history.
type HistorySummary interface {
	// CounterFacts returns what the history records, up to its end when
	// called, about the counter of series and partition (nil when
	// unpartitioned). It must not be called inside a store transaction.
	CounterFacts(ctx context.Context, series string, partition []string) (CounterFacts, error)
}

// CounterFacts are what a HistorySummary answers about a counter.
type CounterFacts struct {
	// Highest is the highest number recorded for the counter (taken,
	// bound, voided, seeded to, closed at); a counter below it was rolled
	// back by the store.
	Highest uint64
	// Closed is true when the counter's period was closed.
	Closed bool
	// Defined is true when the series' definition was recorded.
	Defined bool
	// Passes is, for an unpartitioned counter, the highest number the
	// history records as given or voided by the series' deferred-numbering
	// passes: numbers of the same head (see SequenceConfig.PassHead).
	Passes uint64
	// Through is the position of the history's end the facts hold
	// through (0 when unknown).
	Through uint64
}

// HistoryWatch is a History that tells whether another writer moved it
// since this process's last commit (the vault's ledger): a counter
// checked against the history through position p is checked again before
// its cache is trusted once ForeignThrough passes p (the store may have
// put the counter back to bytes this process holds, after another writer
// moved it on). ForeignThrough must be cheap (an atomic load) and may be
// called inside a store transaction of the history's commits, where it
// already reflects the head that transaction began on.
type HistoryWatch interface {
	ForeignThrough() uint64
}

// Sequences is what the vault asks of its sequences (Q is *sequence.Sequence
// and O sequence.Options): handles on series, and Close.
type Sequences[Q, O any] interface {
	// Sequence returns a handle on series with opts (a partition and a
	// format); handles on one series and partition share one counter.
	Sequence(series string, opts O) (Q, error)
	// Close makes every handle refuse new calls and waits for those in flight.
	Close() error
}

// SequenceCounterOf is set by package sequence to a function of type
//
//	func(key string) (series string, partition []string, ok bool, err error)
//
// which tells whether key, relative to a vault's prefix, is the key of a
// counter, and of which series and partition, for the vault's listing of
// its series.
var SequenceCounterOf any

// SequenceCounterInfo is set by package sequence to a function of type
//
//	func(ctx context.Context, q *sequence.Sequence) (head uint64, period string, closed bool, def sequence.Definition, err error)
//
// which reads q's own counter (never resolving it to a period's), for the
// vault's listing of its series: its head, whether it is closed, the
// definition of its series, and, when the series has periods and the
// partition's last component is a period label of its kind, that label.
var SequenceCounterInfo any

// SequenceRaise is set by package sequence to a function of type
//
//	func(plain []byte, to uint64) (raised []byte, err error)
//
// which returns the opened value of a counter (nil: a counter not written
// yet) raised to to, or nil when it is at or above to already: a
// deferred-numbering pass raises the counter of its series past the
// numbers of its batch, in the batch's commit. A closed counter gives an
// error matching sequence.ErrPeriodClosed.
var SequenceRaise any

// SequenceDefinitionOf is set by package sequence to a function of type
//
//	func(key string) (series string, ok bool)
//
// which tells whether key, relative to a vault's prefix, is the key of a
// series' definition, and of which series, so that the vault lists a
// series declared before its first number.
var SequenceDefinitionOf any

// SequenceDeclareForPasses is set by package sequence to a function of type
//
//	func(ctx context.Context, q *sequence.Sequence) error
//
// which is q.Declare on any store, one without atomic compare-and-swap
// too (a file store): there a series numbered by passes by the record's
// date stores its period with its definition, as elsewhere.
var SequenceDeclareForPasses any

// SequenceHead is set by package sequence to a function of type
//
//	func(plain []byte) (head uint64, err error)
//
// which decodes a counter's opened value and returns its head (the last
// number taken), for the vault's check that a series is numbered on one
// path only.
var SequenceHead any

// SequenceCounterKey is set by package sequence to a function of type
//
//	func(prefix, series string, partition []string) (string, error)
//
// which returns the store key of the counter of series and partition (a
// period's label last) in the vault of prefix, for the passes of a period,
// which raise that counter.
var SequenceCounterKey any
