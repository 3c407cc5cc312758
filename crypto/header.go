package crypto

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
)

// SaltSize is the length of the per-vault Argon2id salt in bytes.
const SaltSize = 16

// HeaderVersion is the vault header format version written by this package.
const HeaderVersion uint8 = 1

// HeaderSize is the length of a marshalled version 1 [Header].
const HeaderSize = len(headerMagic) + 1 + SaltSize + 4 + 4 + 1

// headerMagic starts every marshalled header.
const headerMagic = "NOYH"

// Header is a vault header: format version, per-vault salt and the KDF cost
// parameters used to derive the user key. It is stored in clear.
//
// Binary layout, version 1 (30 bytes):
//
//	[4]  magic "NOYH"
//	[1]  version (1)
//	[16] salt
//	[4]  Argon2id time cost, big-endian
//	[4]  Argon2id memory cost in KiB, big-endian
//	[1]  Argon2id threads
//
// Header is a plain value and safe to copy.
type Header struct {
	// Version is the header format version, [HeaderVersion].
	Version uint8
	// Salt is the per-vault Argon2id salt.
	Salt [SaltSize]byte
	// KDF holds the Argon2id cost parameters.
	KDF KDFParams
}

// NewHeader returns a header with the current version, a fresh random salt
// and the given costs. It refuses costs outside the always-enforced bounds
// of [KDFParams.Check]; policy on weak costs is the caller's (call
// p.Check(false) first).
func NewHeader(p KDFParams) (Header, error) {
	if err := p.Check(true); err != nil {
		return Header{}, fmt.Errorf("new header: %w", err)
	}
	h := Header{Version: HeaderVersion, KDF: p}
	if _, err := io.ReadFull(rand.Reader, h.Salt[:]); err != nil {
		return Header{}, fmt.Errorf("new header: %w", err)
	}
	return h, nil
}

// MarshalBinary encodes h in the layout documented on [Header]. It refuses
// (with [ErrMalformed]) a header that [ParseHeader] would refuse.
func (h Header) MarshalBinary() ([]byte, error) {
	if err := h.validate(); err != nil {
		return nil, fmt.Errorf("marshal header: %w", err)
	}
	b := make([]byte, 0, HeaderSize)
	b = append(b, headerMagic...)
	b = append(b, h.Version)
	b = append(b, h.Salt[:]...)
	b = binary.BigEndian.AppendUint32(b, h.KDF.Time)
	b = binary.BigEndian.AppendUint32(b, h.KDF.MemoryKiB)
	b = append(b, h.KDF.Threads)
	return b, nil
}

// ParseHeader decodes a header written by [Header.MarshalBinary]. Any bad
// input (wrong length, magic or version, an all-zero salt, costs outside the
// always-enforced bounds of [KDFParams.Check]) gives an error wrapping
// [ErrMalformed].
func ParseHeader(b []byte) (Header, error) {
	if len(b) != HeaderSize {
		return Header{}, fmt.Errorf("parse header: length %d, want %d: %w", len(b), HeaderSize, ErrMalformed)
	}
	if string(b[:len(headerMagic)]) != headerMagic {
		return Header{}, fmt.Errorf("parse header: bad magic: %w", ErrMalformed)
	}
	b = b[len(headerMagic):]
	var h Header
	h.Version = b[0]
	copy(h.Salt[:], b[1:1+SaltSize])
	b = b[1+SaltSize:]
	h.KDF.Time = binary.BigEndian.Uint32(b[0:4])
	h.KDF.MemoryKiB = binary.BigEndian.Uint32(b[4:8])
	h.KDF.Threads = b[8]
	if err := h.validate(); err != nil {
		return Header{}, fmt.Errorf("parse header: %w", err)
	}
	return h, nil
}

// validate checks what both MarshalBinary and ParseHeader require.
func (h Header) validate() error {
	if h.Version != HeaderVersion {
		return fmt.Errorf("unknown version %d: %w", h.Version, ErrMalformed)
	}
	if h.Salt == ([SaltSize]byte{}) {
		return fmt.Errorf("all-zero salt: %w", ErrMalformed)
	}
	if err := h.KDF.Check(true); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}
