package crypto

import "errors"

// ErrTampered is the one opaque error returned when a sealed value cannot be
// opened: wrong key, wrong associated data, a flipped bit, a truncated or
// empty envelope, or an unknown envelope version. It deliberately says
// nothing about which of these happened.
var ErrTampered = errors.New("message authentication failed")

// ErrMalformed reports bytes that do not follow one of this package's
// layouts (a vault header, or the clear part of a record envelope).
var ErrMalformed = errors.New("malformed data")

// ErrKDFTooWeak reports key derivation cost parameters below the accepted
// minimum (see [KDFParams.Check]).
var ErrKDFTooWeak = errors.New("key derivation cost too weak")

// ErrKDFTooCostly reports key derivation cost parameters above the accepted
// maximum (see [KDFParams.Check]).
var ErrKDFTooCostly = errors.New("key derivation cost too high")

// ErrKeyWiped reports a use of a key after [Key.Wipe] (or of the zero Key):
// nothing is sealed or opened with it.
var ErrKeyWiped = errors.New("key wiped")
