package vault

import (
	"errors"
	"fmt"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Errors about the device's memory of a vault (Config.StateDir).
var (
	// ErrRollback: the store served a counter or a ledger older than this
	// device has already seen. Nothing is issued or trusted from it.
	ErrRollback = pins.ErrRollback
	// ErrVaultLost: the store holds no vault by a name this device has used,
	// or holds one with another identity (a replaced header), so opening it
	// would silently start numbering over. It also matches ErrRollback. To
	// accept a vault that was really deleted or re-created, call Forget.
	ErrVaultLost = pins.ErrVaultLost
	// ErrStateLost: the state folder records that this device used the vault,
	// but the vault's pins there are missing or damaged beyond the last good
	// copy. Restore the folder from a backup, or call Forget to start over
	// without the protection they gave.
	ErrStateLost = pins.ErrStateLost
	// ErrPinsNotSaved: a pin could not be written to the state folder (disk
	// full or failing, folder removed). The call whose pin failed gets it,
	// with the number it took when it took one (the number is taken but not
	// protected against a rollback), and so does every later call of the
	// vault, until it is reopened on a working folder.
	ErrPinsNotSaved = pins.ErrPinsNotSaved
	// ErrUnpinned marks, among errors matching ErrPinsNotSaved, those of a
	// call that committed (its number taken, its record written) although the
	// pin covering it was not saved; later calls, refused before writing, do
	// not match it. PutNumbered returns the committed record with it.
	ErrUnpinned = pins.ErrUnpinned
	// ErrUnsafeStateFolder: the state folder, or a file in it, is not this
	// user's alone (a symbolic link, not a folder, a folder owned by
	// another user), so Open refuses it rather than keep the rollback pins
	// where someone else could read, replace or redirect them. The error
	// is a *StateFolderError naming the path and the reason. A folder the
	// user owns is tightened to mode 0700 instead.
	ErrUnsafeStateFolder = pins.ErrUnsafeFolder
)

// StateFolderError says why a state folder, or a file in it, was refused
// (Path, Reason). It matches ErrUnsafeStateFolder.
type StateFolderError = pins.FolderError

// Errors returned by vaults and collections. Test them with errors.Is.
var (
	// ErrWrongSecret: the secret does not unlock this vault for this user.
	ErrWrongSecret = errors.New("wrong secret")
	// ErrNoAccess: the vault exists but holds no key for this user.
	ErrNoAccess = errors.New("user has no key in this vault")
	// ErrTampered: a stored value failed authentication (changed, truncated,
	// or copied from another place in the store).
	ErrTampered = crypto.ErrTampered
	// ErrNotFound: no record has that id.
	ErrNotFound = stores.ErrNotFound
	// ErrClosed: the vault (or the DB or store under it) was closed.
	ErrClosed = stores.ErrClosed
	// ErrReservedName: the name starts with '_', which is kept for the SDK's own data.
	ErrReservedName = errors.New("reserved name")
	// ErrInvalidName: the name is empty, too long, or holds a forbidden byte.
	ErrInvalidName = errors.New("invalid name")
	// ErrWeakKDF: the vault header asks for a key-derivation cost outside the
	// accepted bounds (a store lowering it to make guessing cheap, or raising it
	// to make opening hang).
	ErrWeakKDF = errors.New("vault header has an unacceptable key-derivation cost")
	// ErrKDFTooCostly: the key-derivation cost is above the opener's ceiling
	// (Config.MaxKDF). It comes with ErrWeakKDF, before any derivation.
	ErrKDFTooCostly = crypto.ErrKDFTooCostly
)

// Errors of record writes. Test them with errors.Is.
var (
	// ErrInvalidArgument: an argument was rejected before anything was read
	// or written (a nil function or sequence, a sequence of another vault).
	// It is sequence.ErrInvalid, so either matches.
	ErrInvalidArgument = sequence.ErrInvalid
	// ErrRevisionOverflow: the stored record is at the largest revision, so
	// it cannot take another. Nothing was written.
	ErrRevisionOverflow = errors.New("record revision cannot advance past its maximum")
)

// ErrConflict: a conditional write (PutIf, DeleteIf) found the record at
// another revision than the one it was given, or an Update lost the race
// for it more often than its retry budget allows. Nothing was written. The
// error is a *ConflictError. It does not match stores.ErrConflict, so a
// retry loop around a store transaction does not retry it.
var ErrConflict = errors.New("record changed: revision conflict")

// ConflictError is the error of a conditional write whose record is not at
// the expected revision, or of an Update that ran out of attempts. It
// matches ErrConflict, and also ErrNotFound when the record does not exist
// (Got == 0).
type ConflictError struct {
	// Collection and ID name the record.
	Collection, ID string
	// Want is the revision the caller expected (0: the record must not
	// exist); Got is the revision found (0: there is no record).
	Want, Got uint64
	// Attempts is how many times an Update tried before giving up, 0 for
	// a single conditional write.
	Attempts int
	// Err is the cause when the retry budget ran out (the last contention
	// error), else nil.
	Err error
}

// Error describes the conflict: the record, the revisions and, for an
// Update, the attempts.
func (e *ConflictError) Error() string {
	if e.Attempts > 0 || e.Err != nil {
		msg := fmt.Sprintf("%s/%s: still changing after %d attempts", e.Collection, e.ID, e.Attempts)
		if e.Attempts == 0 {
			msg = fmt.Sprintf("%s/%s: kept changing under the update", e.Collection, e.ID)
		}
		if e.Err != nil {
			msg += ": " + e.Err.Error()
		}
		return ErrConflict.Error() + ": " + msg
	}
	switch {
	case e.Got == 0:
		return fmt.Sprintf("%s: %s/%s: expected revision %d, the record does not exist", ErrConflict, e.Collection, e.ID, e.Want)
	case e.Want == 0:
		return fmt.Sprintf("%s: %s/%s: expected no record, found revision %d", ErrConflict, e.Collection, e.ID, e.Got)
	}
	return fmt.Sprintf("%s: %s/%s: expected revision %d, found %d", ErrConflict, e.Collection, e.ID, e.Want, e.Got)
}

// Is matches ErrConflict, and ErrNotFound when there is no record.
func (e *ConflictError) Is(target error) bool {
	return target == ErrConflict || (target == ErrNotFound && e.Got == 0 && e.Attempts == 0 && e.Err == nil)
}

// Unwrap returns the cause of an exhausted retry budget.
func (e *ConflictError) Unwrap() error { return e.Err }

// ErrHubJoined: the vault joined a hub (a handle opened it with
// Config.Hub) after this handle opened it without one. Its numbers are on
// the hub from the join on, so this handle takes none: numbers taken from
// the device's own counters would collide with the hub's, which continue
// them. Open the vault again, with Config.Hub. It matches
// sequence.ErrOffline too, as the refusal of a device opened without its
// hub does (the numbers are out of this handle's reach); nothing was
// taken.
var ErrHubJoined = fmt.Errorf("the vault joined a hub after this handle opened (open it again with Config.Hub): %w", sequence.ErrOffline)
