package crypto

import (
	"bytes"
	"crypto/cipher"
	"reflect"
	"unsafe"

	"golang.org/x/crypto/chacha20poly1305"
)

// One AEAD per key.
//
// Every seal and open of a key uses the same XChaCha20-Poly1305 value,
// made at the key's first use and kept with the key's bytes (keyState), so
// that a hot path (a ledger entry, a counter, a head: several seals per
// commit) does not build one per call. The value holds a copy of the key
// bytes; Wipe zeroes that copy with the key's own, so the promise of
// Wipe (every copy of the key zeroed) still holds. To find the copy, the
// value's layout is checked when it is made: a pointer to a struct whose
// only field is the 32-byte key, holding exactly the key's bytes (the
// layout of golang.org/x/crypto's xchacha20poly1305). Should a later
// version of that package hold its key otherwise, the key is not cached:
// each use makes its own AEAD, as before, and the copy dies with it
// (TestKeyCachesItsAEAD says so when that happens).
//
// Seals and opens run under the key's read lock, so Wipe waits for those
// in progress and none runs with a key half zeroed.

// withAEAD runs fn with k's AEAD, or returns ErrKeyWiped for a wiped or
// zero key. fn must not keep the AEAD.
func (k *Key) withAEAD(fn func(a cipher.AEAD)) error {
	if k == nil || k.s == nil {
		return ErrKeyWiped
	}
	s := k.s
	s.mu.RLock()
	if s.wiped {
		s.mu.RUnlock()
		return ErrKeyWiped
	}
	a := s.aead
	if a == nil {
		s.mu.RUnlock()
		return k.firstAEAD(fn)
	}
	defer s.mu.RUnlock()
	fn(a)
	return nil
}

// firstAEAD is withAEAD for a key without its AEAD yet: it makes it under
// the write lock (or, for a layout it cannot wipe, makes one for this use
// only).
func (k *Key) firstAEAD(fn func(a cipher.AEAD)) error {
	s := k.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wiped {
		return ErrKeyWiped
	}
	a := s.aead
	if a == nil {
		a = newXAEAD(s.b[:])
		if held := aeadKeyBytes(a); held != nil && bytes.Equal(held, s.b[:]) {
			s.aead, s.aeadKey = a, held
		}
	}
	fn(a)
	return nil
}

// newXAEAD returns the XChaCha20-Poly1305 AEAD of key.
func newXAEAD(key []byte) cipher.AEAD {
	a, err := chacha20poly1305.NewX(key)
	if err != nil {
		// Only possible for a key of the wrong length; ours is fixed.
		panic("crypto: xchacha20poly1305: " + err.Error())
	}
	return a
}

// keyArray is the type of the field that holds the AEAD's key.
var keyArray = reflect.TypeFor[[KeySize]byte]()

// aeadKeyBytes returns the memory where a holds its key, when a is a
// pointer to a struct whose only field is a [KeySize]byte; else nil.
func aeadKeyBytes(a cipher.AEAD) []byte {
	v := reflect.ValueOf(a)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	t := v.Type().Elem()
	if t.Kind() != reflect.Struct || t.NumField() != 1 || t.Field(0).Type != keyArray || t.Size() != KeySize {
		return nil
	}
	return unsafe.Slice((*byte)(v.UnsafePointer()), KeySize)
}
