package sequence

import (
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/internal/errs"
	"github.com/noydb-go/noydb/internal/pins"
)

// Sentinel errors. Methods wrap them with the operation and the series, so
// test them with errors.Is.
var (
	// ErrOffline: the store cannot compare-and-swap atomically
	// (Capabilities().CASAtomic is false), so no number can be allocated on it
	// without risking a duplicate. Nothing was written. Deferred numbering is
	// the path on such stores.
	ErrOffline = errors.New("store has no atomic compare-and-swap (offline): no bare number can be taken; write numbered records through vault.NumberingOf, which numbers them in a pass")
	// ErrRequestExpired: a claim's request id is older than the window of
	// request ids a store without transactions remembers, so whether it was
	// already served cannot be verified. Nothing was allocated; the caller must
	// find out from its own records whether the earlier attempt took a number.
	ErrRequestExpired = errors.New("request id too old to verify")
	// ErrNotIssued: Void of a number the series has not handed out.
	ErrNotIssued = errors.New("number not issued")
	// ErrAlreadyVoided: Void of a number that was voided before.
	ErrAlreadyVoided = errors.New("number already voided")
	// ErrOverflow: the counter is at the largest uint64 and cannot advance.
	ErrOverflow = errors.New("counter cannot advance past its maximum")
	// ErrCorrupt: a stored sequence record opened but did not decode. It
	// is numbering.ErrCorrupt and ledger.ErrMalformed: one value.
	ErrCorrupt = errs.ErrCorrupt
	// ErrContention: other writers of the store (other processes) kept
	// winning the race for a counter; nothing was allocated. Test for it
	// with errors.Is: on a store with transactions a vault's numbers commit
	// with its ledger, within the ledger's one retry budget, and its
	// exhaustion is an error matching ErrContention; on a store with only
	// compare-and-swap it is a *ContentionError. It is ledger.ErrContention:
	// one value.
	ErrContention = errs.ErrContention
	// ErrInvalid is matched by every *ValidationError. It is
	// numbering.ErrInvalid and vault.ErrInvalidArgument: one value.
	ErrInvalid = errs.ErrInvalid
)

// ContentionError reports that every attempt of the retry budget (16
// writes) lost a compare-and-swap race to another writer of the same counter
// (in practice, another process: callers in one process are combined and do
// not race each other), on a store without transactions. Nothing was
// allocated; the caller may try again. It matches ErrContention, which is
// what to test for: on a store with transactions the same failure comes
// from the vault's ledger and is not a *ContentionError.
type ContentionError struct {
	// Series is the series name, with its partition if it has one.
	Series string
	// Attempts is how many writes were tried.
	Attempts int
}

// Error describes the contention.
func (e *ContentionError) Error() string {
	return fmt.Sprintf("sequence %s: contention: gave up after %d attempts", e.Series, e.Attempts)
}

// Is makes errors.Is(err, ErrContention) true.
func (e *ContentionError) Is(target error) bool { return target == ErrContention }

// ValidationError reports an argument that was rejected before anything was
// read or written: a series name, partition, format, request id or reason.
type ValidationError struct {
	// Field names the argument: "series", "partition", "format", "request id", "reason".
	Field string
	// Value is the rejected value as text (possibly shortened).
	Value string
	// Reason says what is wrong with it.
	Reason string
}

// Error describes the rejected argument.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("sequence: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// invalid builds a *ValidationError, shortening long values.
func invalid(field, value, reason string) *ValidationError {
	const max = 64
	if len(value) > max {
		value = value[:max] + "…"
	}
	return &ValidationError{Field: field, Value: value, Reason: reason}
}

// ErrRollback: the store serves a counter older than what this device has
// seen, or older than the numbers the vault's ledger records for it (a
// counter deleted, or replayed to an earlier value). Nothing was allocated.
// It is the same error as noydb.ErrRollback.
var ErrRollback = pins.ErrRollback

// ErrSkipped: Void of a number that SeedTo skipped over, so this series never
// issued it (it was numbered elsewhere). Errors carrying it also match
// ErrNotIssued.
var ErrSkipped = errors.New("number skipped by a seed, never issued here")

// ErrDefinitionMismatch: a handle was opened with a definition (format,
// period, fiscal start, time zone, metadata, corrected series) other than
// the one stored with its series. Nothing was taken. Errors carrying it are
// *DefinitionError values.
var ErrDefinitionMismatch = errors.New("series definition differs from the stored one")

// ErrPeriodClosed: a number was asked for in a period that ClosePeriod
// closed. Nothing was taken. Errors carrying it are *PeriodClosedError
// values.
var ErrPeriodClosed = errors.New("period closed")

// DefinitionError reports a handle whose definition differs from the one
// stored with its series (see Options). It matches ErrDefinitionMismatch.
type DefinitionError struct {
	// Series is the series name.
	Series string
	// Stored is the definition stored with the series; Given the handle's.
	Stored, Given Definition
}

// Error describes both definitions.
func (e *DefinitionError) Error() string {
	return fmt.Sprintf("sequence %q: definition {%s} differs from the stored {%s}", e.Series, e.Given, e.Stored)
}

// Is makes errors.Is(err, ErrDefinitionMismatch) true.
func (e *DefinitionError) Is(target error) bool { return target == ErrDefinitionMismatch }

// PeriodClosedError reports an allocation dated into a closed period. It
// matches ErrPeriodClosed.
type PeriodClosedError struct {
	// Series is the series name.
	Series string
	// Partition is the series' partition, without the period (nil for none).
	Partition []string
	// Period is the closed period's label, such as 2026 or FY2025-26.
	Period string
}

// Error names the series, partition and period.
func (e *PeriodClosedError) Error() string {
	return fmt.Sprintf("sequence %s: period %s is closed", displayName(e.Series, e.Partition), e.Period)
}

// Is makes errors.Is(err, ErrPeriodClosed) true.
func (e *PeriodClosedError) Is(target error) bool { return target == ErrPeriodClosed }

// NoSuchSeriesError reports a handle opened with Options.MustExist on a
// series that does not exist. It matches ErrNoSuchSeries.
type NoSuchSeriesError struct {
	// Series is the series name.
	Series string
}

// Error names the series.
func (e *NoSuchSeriesError) Error() string {
	return fmt.Sprintf("sequence %q: %v", e.Series, ErrNoSuchSeries)
}

// Is makes errors.Is(err, ErrNoSuchSeries) true.
func (e *NoSuchSeriesError) Is(target error) bool { return target == ErrNoSuchSeries }

// ErrNoSuchSeries: a handle opened with Options.MustExist names a series
// that does not exist (see Sequence.Declare). Nothing was taken or written.
// Errors carrying it are *NoSuchSeriesError values.
var ErrNoSuchSeries = errors.New("no such series")
