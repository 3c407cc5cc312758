// Package deferred holds what the vault hands a deferred-numbering series
// (package numbering) and what the series hands back: the store, sealer,
// ledger and pins it works on, and the records it reads and stamps. Only the
// vault builds these; users call vault.NumberingOf.
package deferred

import (
	"context"
	"errors"
	"iter"

	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/internal/seal"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// Sealer seals the values a series stores (the vault's one sealer).
type Sealer = seal.Sealer

// Pins is the device-local memory of the highest value seen per key (the
// vault's rollback pins).
type Pins = pins.Counter

// Backend is what a series works on.
type Backend struct {
	// Store holds the series' values (and the records).
	Store stores.Store
	// Sealer seals every value the series stores.
	Sealer Sealer
	// Prefix is the vault's key prefix; series values live under
	// Prefix+"_numbering/".
	Prefix string
	// Partition, if set, is the one period label (2026-12, FY2026-27…)
	// whose numbers the series gives: a series with periods counts each
	// with a deferred series of its own, which keeps its handoff entries,
	// head, batches and index under the period's folder, records its
	// numbers in the ledger under the label (Entry.Partition), and shares
	// the head of the period's counter (Counter, Raise, Recorded are the
	// period's). Nil for a series without periods.
	Partition []string
	// Ledger receives the NumberAssigned and NumberVoided entries.
	Ledger Ledger
	// Records reads and stamps the numbered records.
	Records Records
	// Enter, if set, is called first by every method of the series; an
	// error (a closed vault) ends the call, else the method calls exit when
	// it returns. Records is called only between the two.
	Enter func(ctx context.Context) (exit func(), err error)
	// Pins, if set, catches a store serving an older head.
	Pins Pins
	// Guard, if set, is asked whether the series may still write as the
	// vault's person (one revoked since the handle opened may not): get
	// reads a key. A pass asks it with plain reads before it plans a
	// batch, and again when it commits one: inside the commit's
	// transaction, reading through it, where the store has transactions;
	// else with plain reads just before the batch is written. An error
	// refuses the pass before it writes anything and is returned by it.
	Guard func(get func(key string) (stores.Item, error)) error
	// Counter, if set, returns the head of the counter of the same name as
	// the series (its unpartitioned sequence counter; 0 when it has none),
	// read with get. A series has one head for both paths: a pass numbers
	// its batch above the counter and above its own last number.
	Counter func(get func(key string) (stores.Item, error)) (uint64, error)
	// Raise, if set, raises the counter of the same name as the series to
	// to. In tx (the transaction that commits a batch) the counter must be
	// at from: one that moved (a number taken at write time since it was
	// read) is an error wrapping ErrCounterMoved, and nothing is written,
	// so the pass plans its batch's numbers again. With tx nil (after a
	// batch's commit, on a store without transactions, or to finish a
	// batch) it raises the counter to at least to by compare-and-swap,
	// whatever it is at, and from is not used.
	Raise func(ctx context.Context, tx stores.Tx, from, to uint64) error
	// SeriesFormat, if set, returns the format the series numbers with,
	// from the series' one definition (stored with its counter): want when
	// it has none there, else its format (a want that differs is an error
	// wrapping numbering.ErrMismatch). A pass asks it before it checks its
	// config. It writes nothing.
	SeriesFormat func(ctx context.Context, want string) (string, error)
	// Recorded, if set, returns what the vault's ledger records of the
	// series' numbers (from the ledger's summary of facts, up to its head
	// when called; see ledger.FactKind). A head below it was rolled back
	// by the store: the series refuses with numbering.ErrRollback before
	// it gives any number. It is never called inside a store transaction.
	Recorded func(ctx context.Context) (Recorded, error)
}

// Recorded is what the vault's ledger records of a series' numbers.
type Recorded struct {
	// Passes is the highest number given or voided by the series' passes:
	// their head is at or above it.
	Passes uint64
	// Counter is the highest number of the counter of the same name
	// (taken, bound, voided, seeded to): the one head is at or above it.
	Counter uint64
	// Closed is true once the counter's period was closed: a pass gives
	// it no number.
	Closed bool
}

// ErrCounterMoved: the counter of a series was not at the value a pass
// planned its batch from (Backend.Raise).
var ErrCounterMoved = errors.New("the series' counter moved")

// CounterHead asks b's Counter, if set, reading with plain reads of b's
// store (0 when unset).
func (b Backend) CounterHead(ctx context.Context) (uint64, error) {
	if b.Counter == nil {
		return 0, nil
	}
	return b.Counter(func(key string) (stores.Item, error) { return b.Store.Get(ctx, key) })
}

// Check asks b's Guard, if set, reading with plain reads of b's store.
func (b Backend) Check(ctx context.Context) error {
	if b.Guard == nil {
		return nil
	}
	return b.Guard(func(key string) (stores.Item, error) { return b.Store.Get(ctx, key) })
}

// Ledger is what a series does with the vault's audit ledger: read its
// head and entries, and append the entries of a pass. The vault's writable
// ledger (package ledger's unexported implementation) satisfies it.
type Ledger interface {
	// Head returns the ledger's current head.
	Head(ctx context.Context) (ledger.Head, error)
	// Read yields the entries from position from up to the head, checking
	// the chain as it goes; a problem is yielded once and ends it.
	Read(ctx context.Context, from uint64) iter.Seq2[ledger.Entry, error]
	// Append appends entries as one batch, all or none, after the head at
	// commit time.
	Append(ctx context.Context, entries ...ledger.Entry) (ledger.Head, error)
}

// Records reads and stamps the records a series numbers. Implementations
// must be safe for concurrent use.
//
// A stamped record carries its number in an authenticated mark of the
// series, which the store cannot remove without the record failing to
// open, and in its content, put there by the application's setter.
type Records interface {
	// Number reports whether collection holds a record with id, the number
	// of series it carries (0: none) and, when it has none, the provisional
	// id it was handed off with ("" when it was written without one). A
	// record that fails authentication is an error wrapping ErrTampered.
	Number(ctx context.Context, collection, id, series string) (n uint64, provisional string, found bool, err error)
	// Stamp gives the record collection/id number m.N of m.Series as its
	// next revision (the setter applied, the mark added), unless it already
	// carries it. A record that carries another number of m.Series is left
	// as it is, and the returned Stamp says which in Carries. An error
	// wrapping stores.ErrNotFound when the record does not exist. It records
	// nothing in the ledger: the pass does.
	Stamp(ctx context.Context, collection, id string, m Mark) (Stamp, error)
}

// BatchStamper is implemented by Records that can stamp many records of a
// collection in one store transaction.
type BatchStamper interface {
	// StampBatch does what Stamp does for ids[i] and marks[i], for every i,
	// in one transaction. found[i] is false for a record that does not
	// exist. An error wrapping stores.ErrConflict or stores.ErrTooLarge
	// makes the pass stamp the records one by one.
	StampBatch(ctx context.Context, collection string, ids []string, marks []Mark) (stamps []Stamp, found []bool, err error)
}

// PlanChecker is implemented by Records that can tell, when a pass plans
// its batch, that a pending record could not be stamped (a series that
// renders each number with the record's own date, and a record without
// one): the pass then fails before its batch is committed, taking no
// number, instead of stopping at the record with the batch in flight.
type PlanChecker interface {
	// NumberToPlan is Number that also fails, with the error Stamp would
	// return, for a record it finds pending that Stamp could not stamp.
	NumberToPlan(ctx context.Context, collection, id, series string) (n uint64, provisional string, found bool, err error)
}

// Mark is a number of a series as a pass stamps it on a record.
type Mark struct {
	// Series is the numbering series' name.
	Series string
	// N is the number.
	N uint64
	// Formatted is N rendered in the format of the batch that gave it.
	Formatted string
}

// Stamp is the outcome of Records.Stamp.
type Stamp struct {
	// Stamped is true when the call wrote a new revision.
	Stamped bool
	// Revision is the record's revision after the call.
	Revision uint64
	// CipherHash is the SHA-256 of the record's stored ciphertext after the call.
	CipherHash []byte
	// Carries is, when not 0, the other number of the series that the
	// record already carries: the call wrote nothing.
	Carries uint64
	// Formatted, if set, is the text of the number the record carries,
	// when the vault rendered it otherwise than Mark.Formatted (by the
	// record's own date): the series' index keeps it.
	Formatted string
}

// Hooks are the calls of a series that only the vault makes.
type Hooks struct {
	// Handoff returns the key and sealed value of the handoff entry that
	// puts record id in line under provisional (a UUIDv7): a pass numbers it
	// once the record is in the store carrying that provisional id. The
	// vault writes it before the record, or in the record's transaction.
	// Writing it again is harmless.
	Handoff func(provisional, id string) (key string, value []byte, err error)
	// Format returns the series' stored format, storing want first when the
	// series has none yet. A want that is not empty and differs from the
	// stored one is an error wrapping numbering.ErrMismatch.
	Format func(ctx context.Context, want string) (string, error)
	// StoredFormat is Format without the write: the series' stored format
	// checked against want, or want when the series has none stored (ok
	// false then), for a read that must store nothing.
	StoredFormat func(ctx context.Context, want string) (format string, ok bool, err error)
	// Indexed returns the provisional id and number that the series' index
	// (written after the record was stamped, never for a batch in flight)
	// holds for record id; ok is false when it holds none, or a voided
	// number (the record was gone when its batch was stamped).
	Indexed func(ctx context.Context, id string) (provisional string, n uint64, formatted string, ok bool, err error)
	// Period returns, for the series of a period (Backend.Partition), the
	// key and sealed value of the entry that lists the period among its
	// series': the vault writes it before the period's first handoff
	// entry. Writing it again is harmless.
	Period func() (key string, value []byte, err error)
	// Periods returns the labels of the periods of the series (of any
	// handle on it) that had records handed off, in order.
	Periods func(ctx context.Context) ([]string, error)
}
