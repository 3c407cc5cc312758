package vault

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/noydb-go/noydb/ledger"
)

// Limits of an application event (see Vault.Record).
const (
	// MaxEventNameLen bounds the name of an event, in bytes.
	MaxEventNameLen = 128
	// MaxEventDataLen bounds the data of an event, in bytes.
	MaxEventDataLen = 64 << 10
)

// Audit is a read-only view of a vault's audit ledger: one hash chain of
// every record write and delete, every number taken, seeded, voided or
// assigned, and the events the application recorded with Vault.Record.
// It has no method that writes. Get it with Vault.Audit; it is safe for
// concurrent use and refuses with ErrClosed once the vault is closed.
type Audit struct {
	l ledgerReader
}

// ledgerReader is what the audit view may do with the vault's ledger:
// read it, never write it.
type ledgerReader interface {
	Read(ctx context.Context, from uint64) iter.Seq2[ledger.Entry, error]
	Verify(ctx context.Context) (ledger.Report, error)
	VerifyProgress(ctx context.Context, progress func(entries uint64)) (ledger.Report, error)
	Head(ctx context.Context) (ledger.Head, error)
}

// Audit returns the read-only view of the vault's audit ledger. The SDK
// writes its own entries; an application adds its events with Record.
func (v *Vault) Audit() *Audit { return v.audit }

// Read yields the entries from position from (0 means 1) up to the head as
// it was when reading started, in order, checking as it goes that no entry
// is missing, altered or out of its chain: the first problem (a
// *ledger.GapError, *ledger.ChainError or *ledger.TamperError), or a store
// error, is yielded once with a zero Entry and ends the sequence. With the
// vault's StateDir, a ledger older than one this device has seen fails
// with an error matching ErrRollback. An application's events are entries
// of kind ledger.AppEvent (see ledger.Entry.Event).
func (a *Audit) Read(ctx context.Context, from uint64) iter.Seq2[ledger.Entry, error] {
	return a.l.Read(ctx, from)
}

// Verify walks the whole ledger from position 1, as Read does, and reports
// what it found. It also checks the signature of every commit (one, on
// the commit's last entry, covering the others through the chain) against
// its author's signing key and that the author's role allowed each entry at its
// position (a *ledger.SignatureError, matching ledger.ErrBadSignature and
// ErrTampered, otherwise; see package ledger): the people the ledger does
// not introduce itself (granted on another device, the authors of a hub's
// feed) are taken from the keyring, each entry checked as at Open. The
// error is non-nil whenever the ledger could not be shown intact: then either Report.Problem is set (and is the error), or
// the store failed or ctx ended (Report.Problem is nil, and the report
// covers what was read before).
func (a *Audit) Verify(ctx context.Context) (ledger.Report, error) {
	return a.l.Verify(ctx)
}

// VerifyProgress is Verify, calling progress (when not nil) with the
// number of entries walked so far, after each one, on the calling
// goroutine: a progress bar's hook. It checks exactly what Verify checks,
// signatures and roles included; a count passed to progress is no
// promise that those entries are intact (signatures are checked in
// batches), the report and error say that.
func (a *Audit) VerifyProgress(ctx context.Context, progress func(entries uint64)) (ledger.Report, error) {
	return a.l.VerifyProgress(ctx, progress)
}

// Head returns the ledger's current head: the position of its last entry
// and that entry's chain MAC (the zero Head for an empty ledger).
func (a *Audit) Head(ctx context.Context) (ledger.Head, error) {
	return a.l.Head(ctx)
}

// Record appends an application's own event to the vault's audit ledger,
// as the vault's user, and returns the head it was committed at (the
// event's position is the returned Seq). The entry has kind
// ledger.AppEvent, which the SDK never takes for one of its own entries:
// whatever name and data hold, audits of records and sequences ignore it,
// and readers get name and data back with ledger.Entry.Event. The event is
// chained and sealed like every entry, so Verify catches it changed or
// removed.
//
// name says what happened ("login", "export"): 1 to MaxEventNameLen bytes
// of UTF-8 without control characters. data is up to MaxEventDataLen bytes
// of anything, nil included; it is sealed in the store like every entry,
// so the store does not see it. A bad name or data fails with an error
// matching ErrInvalidArgument, writing nothing. An event that committed
// but whose rollback pin could not be saved returns its head with an error
// matching ErrPinsNotSaved.
func (v *Vault) Record(ctx context.Context, name string, data []byte) (ledger.Head, error) {
	if err := checkEvent(name, data); err != nil {
		return ledger.Head{}, fmt.Errorf("record event: %w", err)
	}
	if err := v.enter(ctx); err != nil {
		return ledger.Head{}, fmt.Errorf("record event %q: %w", name, err)
	}
	defer v.exit()
	h, err := v.ledger.Append(ctx, ledger.Entry{Kind: ledger.AppEvent, Reason: name, CipherHash: slices.Clone(data)})
	if err != nil {
		return h, fmt.Errorf("record event %q: %w", name, closedIfWiped(err))
	}
	return h, nil
}

// checkEvent validates the name and data of an application event.
func checkEvent(name string, data []byte) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty event name", ErrInvalidArgument)
	case len(name) > MaxEventNameLen:
		return fmt.Errorf("%w: event name of %d bytes (at most %d)", ErrInvalidArgument, len(name), MaxEventNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: event name is not UTF-8", ErrInvalidArgument)
	case len(data) > MaxEventDataLen:
		return fmt.Errorf("%w: event data of %d bytes (at most %d)", ErrInvalidArgument, len(data), MaxEventDataLen)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: event name %q holds a control character", ErrInvalidArgument, name)
		}
	}
	return nil
}
