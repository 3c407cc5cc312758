package crypto

import (
	"errors"

	"github.com/noydb-go/noydb/internal/errs"
)

// ErrTampered is the one opaque error returned when a sealed value cannot be
// opened: wrong key, wrong associated data, a flipped bit, a truncated or
// empty envelope, or an unknown envelope version. It deliberately says
// nothing about which of these happened. It is the module's one tamper
// error: ledger.ErrTampered, numbering.ErrTampered and vault.ErrTampered
// are the same value.
var ErrTampered = errors.New("message authentication failed")

// ErrMalformed reports bytes that do not follow one of this package's
// layouts (a vault header, or the clear part of a record envelope). It is
// the one corrupt-data error of the module: ledger.ErrMalformed,
// numbering.ErrCorrupt and sequence.ErrCorrupt are the same value.
var ErrMalformed = errs.ErrCorrupt

// ErrKDFTooWeak reports key derivation cost parameters below the accepted
// minimum (see [KDFParams.Check]).
var ErrKDFTooWeak = errors.New("key derivation cost too weak")

// ErrKDFTooCostly reports key derivation cost parameters above the accepted
// maximum (see [KDFParams.Check]).
var ErrKDFTooCostly = errors.New("key derivation cost too high")

// ErrKeyWiped reports a use of a key after [Key.Wipe] (or of the zero Key):
// nothing is sealed or opened with it.
var ErrKeyWiped = errors.New("key wiped")
