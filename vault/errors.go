package vault

import (
	"errors"
	"github.com/noydb-go/noydb/sequence"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/pins"
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
)

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
