package crypto

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"sync"
)

// KeySize is the length of a [Key] in bytes.
const KeySize = 32

// redacted is what every formatting of a Key prints.
const redacted = "crypto.Key(REDACTED)"

// Key is a 256-bit symmetric key. Its bytes are never exported and every
// fmt verb prints "crypto.Key(REDACTED)".
//
// A Key is immutable once made and safe for concurrent use. Use *Key values
// obtained from [GenerateKey], [DeriveUserKey], [Key.Derive] or [UnwrapKey];
// the zero Key is all zero bytes and must not be used.
type Key struct {
	b [KeySize]byte
}

// GenerateKey returns a fresh random key read from crypto/rand.
func GenerateKey() (*Key, error) {
	k := new(Key)
	if _, err := io.ReadFull(rand.Reader, k.b[:]); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// Derive returns the subkey of k for a purpose label, computed with
// HKDF-SHA256 (RFC 5869) with k as input keying material, no salt and the
// label as info. The same key and label always give the same subkey;
// different labels give independent subkeys. Labels should name the purpose
// and a version, e.g. "noydb ledger v1".
func (k *Key) Derive(label string) *Key {
	out, err := hkdf.Key(sha256.New, k.b[:], nil, label, KeySize)
	if err != nil {
		// Only possible for lengths above 255*32 bytes; ours is fixed.
		panic("crypto: hkdf: " + err.Error())
	}
	d := new(Key)
	copy(d.b[:], out)
	clear(out)
	return d
}

// MAC returns the HMAC-SHA256 of the parts under k. Each part is prefixed
// with its length as 8 bytes big-endian before hashing, so the encoding is
// unambiguous: MAC("ab", "c") differs from MAC("a", "bc") and from MAC("abc").
// The result is 32 bytes; compare MACs with [EqualMAC].
func (k *Key) MAC(parts ...[]byte) []byte {
	m := hmac.New(sha256.New, k.b[:])
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		m.Write(n[:])
		m.Write(p)
	}
	return m.Sum(nil)
}

// EqualMAC reports whether a and b are equal, in time that does not depend
// on their contents.
func EqualMAC(a, b []byte) bool {
	return hmac.Equal(a, b)
}

// String returns "crypto.Key(REDACTED)"; the key bytes are never printed.
func (k Key) String() string { return redacted }

// GoString returns "crypto.Key(REDACTED)", so %#v does not print the bytes.
func (k Key) GoString() string { return redacted }

// Format implements fmt.Formatter: every verb, %x and %q included, prints
// "crypto.Key(REDACTED)".
func (k Key) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, redacted)
}

// MACer computes Key.MAC for one key, reusing the HMAC state between calls
// instead of rebuilding it each time: for hot paths such as a ledger's chain.
// It is safe for concurrent use.
type MACer struct {
	pool sync.Pool
}

// NewMACer returns a MACer for k. The MACs it computes equal k.MAC's.
func NewMACer(k *Key) *MACer {
	key := k.b // a copy: the MACer does not keep k alive or see later changes
	m := &MACer{}
	m.pool.New = func() any { return hmac.New(sha256.New, key[:]) }
	return m
}

// MAC returns the same bytes as Key.MAC with the MACer's key.
func (m *MACer) MAC(parts ...[]byte) []byte {
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	out := h.Sum(nil)
	m.pool.Put(h)
	return out
}
