package crypto

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"sync"
	"sync/atomic"
)

// KeySize is the length of a [Key] in bytes.
const KeySize = 32

// redacted is what every formatting of a Key prints.
const redacted = "crypto.Key(REDACTED)"

// Key is a 256-bit symmetric key. Its bytes are never exported and every
// fmt verb prints "crypto.Key(REDACTED)".
//
// A Key is safe for concurrent use, and copies of a Key value share one key:
// [Key.Wipe] zeroes it for all of them, after which every use fails with
// [ErrKeyWiped] (sealing and opening) or yields nothing usable (see Derive
// and MAC) instead of working with zero bytes. Use *Key values obtained from
// [GenerateKey], [DeriveUserKey], [Key.Derive] or [UnwrapKey]; the zero Key
// holds no key and behaves as a wiped one.
type Key struct {
	s *keyState
}

// keyState is the key material a Key and its copies share.
type keyState struct {
	mu    sync.RWMutex
	b     [KeySize]byte
	wiped bool
	// aead is the key's XChaCha20-Poly1305, made at its first use, and
	// aeadKey the copy of b it holds, zeroed by Wipe (aead.go).
	aead    cipher.AEAD
	aeadKey []byte
}

// newKey returns a Key holding a copy of b (exactly KeySize bytes).
func newKey(b []byte) *Key {
	s := new(keyState)
	copy(s.b[:], b)
	return &Key{s: s}
}

// use runs fn with the key bytes, which fn must not keep, or returns
// ErrKeyWiped for a wiped or zero key. Wipe waits for uses in progress.
func (k *Key) use(fn func(b []byte)) error {
	if k == nil || k.s == nil {
		return ErrKeyWiped
	}
	k.s.mu.RLock()
	defer k.s.mu.RUnlock()
	if k.s.wiped {
		return ErrKeyWiped
	}
	fn(k.s.b[:])
	return nil
}

// Wipe overwrites the key's bytes with zeros, for k and every copy of it.
// Uses in progress on other goroutines finish first; later uses fail with
// [ErrKeyWiped]. Wiping twice is harmless. Subkeys made with Derive and
// MACers made with NewMACer are separate keys: wipe them too.
func (k *Key) Wipe() {
	if k == nil || k.s == nil {
		return
	}
	k.s.mu.Lock()
	defer k.s.mu.Unlock()
	clear(k.s.b[:])
	clear(k.s.aeadKey)
	k.s.aead, k.s.aeadKey = nil, nil
	k.s.wiped = true
}

// Wiped reports whether k was wiped (or is the zero Key).
func (k *Key) Wiped() bool {
	return k.use(func([]byte) {}) != nil
}

// GenerateKey returns a fresh random key read from crypto/rand.
func GenerateKey() (*Key, error) {
	var b [KeySize]byte
	defer clear(b[:])
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return newKey(b[:]), nil
}

// Derive returns the subkey of k for a purpose label, computed with
// HKDF-SHA256 (RFC 5869) with k as input keying material, no salt and the
// label as info. The same key and label always give the same subkey;
// different labels give independent subkeys. Labels should name the purpose
// and a version, e.g. "noydb ledger v1". The subkey of a wiped key is a
// wiped key.
func (k *Key) Derive(label string) *Key {
	var out []byte
	var err error
	if k.use(func(b []byte) { out, err = hkdf.Key(sha256.New, b, nil, label, KeySize) }) != nil {
		d := newKey(nil)
		d.Wipe()
		return d
	}
	if err != nil {
		// Only possible for lengths above 255*32 bytes; ours is fixed.
		panic("crypto: hkdf: " + err.Error())
	}
	d := newKey(out)
	clear(out)
	return d
}

// MAC returns the HMAC-SHA256 of the parts under k. Each part is prefixed
// with its length as 8 bytes big-endian before hashing, so the encoding is
// unambiguous: MAC("ab", "c") differs from MAC("a", "bc") and from MAC("abc").
// The result is 32 bytes; compare MACs with [EqualMAC]. A wiped key has no
// MAC: the result is nil, which equals no MAC.
func (k *Key) MAC(parts ...[]byte) []byte {
	var m hash.Hash
	if k.use(func(b []byte) { m = hmac.New(sha256.New, b) }) != nil {
		return nil
	}
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

// redactedMACer is what every formatting of a MACer prints.
const redactedMACer = "crypto.MACer(REDACTED)"

// String returns "crypto.MACer(REDACTED)".
func (m *MACer) String() string { return redactedMACer }

// GoString returns "crypto.MACer(REDACTED)", so %#v does not print the key.
func (m *MACer) GoString() string { return redactedMACer }

// Format implements fmt.Formatter: every verb prints "crypto.MACer(REDACTED)".
func (m *MACer) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, redactedMACer)
}

// MACer computes Key.MAC for one key, reusing the HMAC state between calls
// instead of rebuilding it each time: for hot paths such as a ledger's chain.
// It is safe for concurrent use. Like a Key it prints as REDACTED and can be
// wiped.
type MACer struct {
	key   *Key // a copy of the key it was made with
	wiped atomic.Bool
	pool  sync.Pool
}

// NewMACer returns a MACer for k. The MACs it computes equal k.MAC's. The
// MACer keeps its own copy of the key: wiping k does not wipe it (call
// [MACer.Wipe]), and a MACer made from a wiped key computes nothing.
func NewMACer(k *Key) *MACer {
	m := &MACer{key: newKey(nil)}
	if k.use(func(b []byte) { copy(m.key.s.b[:], b) }) != nil {
		m.Wipe()
	}
	m.pool.New = func() any {
		st := new(macState)
		if m.key.use(func(b []byte) { st.h = hmac.New(sha256.New, b) }) != nil {
			return nil
		}
		return st
	}
	return m
}

// macState is one HMAC state of a MACer's pool, with the scratch its
// length prefixes are written from.
type macState struct {
	h hash.Hash
	n [8]byte
}

// Wipe zeroes the MACer's key; later calls of MAC return nil (no MAC),
// which never equals a real one. HMAC states already built and idle in the
// MACer's pool are dropped as they are met, not zeroed.
func (m *MACer) Wipe() {
	m.wiped.Store(true)
	m.key.Wipe()
}

// MAC returns the same bytes as Key.MAC with the MACer's key, or nil once
// the MACer is wiped.
func (m *MACer) MAC(parts ...[]byte) []byte {
	return m.AppendMAC(nil, parts...)
}

// AppendMAC appends MAC(parts...) to dst and returns the extended slice:
// with room in dst, a MAC costs no allocation. Once the MACer is wiped it
// appends nothing.
func (m *MACer) AppendMAC(dst []byte, parts ...[]byte) []byte {
	if m.wiped.Load() {
		return dst
	}
	st, _ := m.pool.Get().(*macState)
	if st == nil {
		return dst
	}
	st.h.Reset()
	for _, p := range parts {
		binary.BigEndian.PutUint64(st.n[:], uint64(len(p)))
		st.h.Write(st.n[:])
		st.h.Write(p)
	}
	dst = st.h.Sum(dst)
	m.pool.Put(st)
	return dst
}
