package numbering

import (
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/errs"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/stores"
)

// Errors returned by a Series. Methods wrap them with the operation and the
// series name, so test them with errors.Is.
var (
	// ErrPassRunning: another pass holds the series' lock (in this process,
	// or wherever the store's stores.Locker reaches: every process on the
	// folder of a file store, every machine on a PostgreSQL database), or
	// the series' head changed under a pass. Nothing was numbered by the
	// call; run it again later.
	ErrPassRunning = errors.New("a numbering pass is already running for this series")
	// ErrAlreadyNumbered: Enqueue of a record that already has its number.
	ErrAlreadyNumbered = errors.New("record already numbered")
	// ErrNotFound: Enqueue of a record that does not exist.
	ErrNotFound = stores.ErrNotFound
	// ErrInvalid: a series name, option or record id was rejected before
	// anything was read or written. It is sequence.ErrInvalid: one value.
	ErrInvalid = errs.ErrInvalid
	// ErrMismatch: the series was first numbered for another collection, or
	// with another format than the one asked for (see Options.Format). The
	// error is a *MismatchError when the series says which it was.
	ErrMismatch = errors.New("series was set up with another collection or format")
	// ErrTampered: a stored numbering value failed authentication, or its key
	// does not match its content (changed, or copied from another place).
	ErrTampered = crypto.ErrTampered
	// ErrCorrupt: a stored numbering value opened but did not decode, or an
	// interrupted batch cannot be read back. It is sequence.ErrCorrupt and
	// ledger.ErrMalformed: one value.
	ErrCorrupt = errs.ErrCorrupt
	// ErrNotObject: a record of a series opened with the deprecated
	// vault.Vault.Numbering is not a JSON object, so its number field
	// (Options.Field) cannot be set. vault.NumberingOf never returns it.
	ErrNotObject = errors.New("record is not a JSON object")
	// ErrDuplicate: Audit found a record given more than one number of the
	// series, or a number given to more than one record.
	ErrDuplicate = errors.New("number given twice")
	// ErrNumberedAtWriteTime is no longer returned: a series has one head
	// for both paths (see the package's One head per series), so numbering
	// a series at write time and by passes gives no number twice. It was
	// the refusal of the second path of a series, and stays for callers
	// that test for it.
	ErrNumberedAtWriteTime = errors.New("series numbered by the other path (at write time or by passes)")
	// ErrRollback: the series' head is below a number the vault's ledger
	// records as given by its passes, or that a record carries: the store
	// served an older head (a backup put back, or its _numbering keys
	// rolled back), and a pass from it would give those numbers again.
	// Nothing is numbered. It is noydb.ErrRollback, vault.ErrRollback and
	// sequence.ErrRollback: one value.
	ErrRollback = pins.ErrRollback
)

// MismatchError is ErrMismatch saying what did not match: the handle asked
// for a collection or a format other than the one the series keeps since
// it was first numbered. errors.Is(err, ErrMismatch) holds for it.
type MismatchError struct {
	// Collection is true when the collections differ, false when the
	// formats do.
	Collection bool
	// Stored is the series' own collection or format; Asked is the one
	// the handle asked for.
	Stored, Asked string
}

// Error says what differs: the collection or the format.
func (e *MismatchError) Error() string {
	if e.Collection {
		return fmt.Sprintf("series numbers collection %q, not %q", e.Stored, e.Asked)
	}
	return fmt.Sprintf("series formats its numbers as %q, not %q", e.Stored, e.Asked)
}

// Is reports whether target is ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }
