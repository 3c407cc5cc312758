package crypto

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
)

// Envelope format constants.
const (
	// EnvelopeVersion is the version byte of envelopes made by [Seal].
	EnvelopeVersion uint8 = 1
	// RecordEnvelopeVersion is the version byte of envelopes made by [SealRecord].
	RecordEnvelopeVersion uint8 = 1
	// NonceSize is the XChaCha20-Poly1305 nonce length in bytes.
	NonceSize = chacha20poly1305.NonceSizeX
	// TagSize is the Poly1305 authentication tag length in bytes.
	TagSize = chacha20poly1305.Overhead
	// EnvelopeOverhead is how many bytes [Seal] adds to a plaintext.
	EnvelopeOverhead = 1 + NonceSize + TagSize
	// RecordEnvelopeOverhead is how many bytes [SealRecord] adds to a plaintext.
	RecordEnvelopeOverhead = 1 + 8 + NonceSize + TagSize
)

// Domain-separation labels inside associated data.
const (
	recordDomain  = "noydb record"
	keyDomain     = "noydb key"
	wrappedDomain = "noydb wrapped key"
)

// RecordRef names a record: the vault, collection and id it is stored
// under, and its revision. [SealRecord] binds all four to the ciphertext.
// RecordRef is a plain value, safe to copy and share.
type RecordRef struct {
	// Vault is the vault name.
	Vault string
	// Collection is the collection name.
	Collection string
	// ID is the record id.
	ID string
	// Revision is the record revision; it is stored in clear in the envelope.
	Revision uint64
}

// Seal encrypts and authenticates plaintext under k with XChaCha20-Poly1305
// and a fresh random 24-byte nonce, binding the associated data ad (which
// is not stored). The envelope layout, version 1, is
//
//	[1]  envelope version (1)
//	[24] nonce
//	[n+16] ciphertext and tag
//
// The AEAD associated data is the version byte followed by ad, so the
// version is authenticated too. Seal is safe for concurrent use.
func Seal(k *Key, plaintext, ad []byte) ([]byte, error) {
	var nonce [NonceSize]byte
	if _, err := io.ReadFull(rand.Reader, nonce[:]); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return sealWithNonce(k, nonce[:], plaintext, ad)
}

// sealWithNonce is Seal with a caller-chosen nonce. Only Seal (random
// nonce) and the known-answer tests may call it.
func sealWithNonce(k *Key, nonce, plaintext, ad []byte) ([]byte, error) {
	aead, err := newAEAD(k)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	out := make([]byte, 0, EnvelopeOverhead+len(plaintext))
	out = append(out, EnvelopeVersion)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, sealAD(EnvelopeVersion, ad)), nil
}

// Open authenticates and decrypts an envelope made by [Seal] with the same
// key and associated data. Any failure (short or empty envelope, unknown
// version, wrong key, wrong ad, any modified byte) returns exactly
// [ErrTampered]; a wiped key returns [ErrKeyWiped]. Open is safe for
// concurrent use.
func Open(k *Key, envelope, ad []byte) ([]byte, error) {
	if len(envelope) < EnvelopeOverhead || envelope[0] != EnvelopeVersion {
		return nil, ErrTampered
	}
	nonce := envelope[1 : 1+NonceSize]
	aead, err := newAEAD(k)
	if err != nil {
		return nil, err
	}
	pt, err := aead.Open(nil, nonce, envelope[1+NonceSize:], sealAD(envelope[0], ad))
	if err != nil {
		return nil, ErrTampered
	}
	if pt == nil {
		pt = []byte{}
	}
	return pt, nil
}

// SealRecord encrypts a record's plaintext under k, binding it to the
// record's vault, collection, id and revision. The envelope layout,
// version 1, is
//
//	[1]  record envelope version (1)
//	[8]  revision, big-endian, in clear
//	[24] nonce
//	[n+16] ciphertext and tag
//
// The AEAD associated data is
//
//	version byte || lp("noydb record") || lp(vault) || lp(collection) || lp(id) || revision (8 bytes, big-endian)
//
// where lp(s) is the length of s as 8 bytes big-endian followed by s. The
// domain label keeps it distinct from [KeyAD]. SealRecord is safe for
// concurrent use.
func SealRecord(k *Key, plaintext []byte, ref RecordRef) ([]byte, error) {
	var nonce [NonceSize]byte
	if _, err := io.ReadFull(rand.Reader, nonce[:]); err != nil {
		return nil, fmt.Errorf("seal record: %w", err)
	}
	return sealRecordWithNonce(k, nonce[:], plaintext, ref)
}

// sealRecordWithNonce is SealRecord with a caller-chosen nonce. Only
// SealRecord (random nonce) and the known-answer tests may call it.
func sealRecordWithNonce(k *Key, nonce, plaintext []byte, ref RecordRef) ([]byte, error) {
	aead, err := newAEAD(k)
	if err != nil {
		return nil, fmt.Errorf("seal record: %w", err)
	}
	out := make([]byte, 0, RecordEnvelopeOverhead+len(plaintext))
	out = append(out, RecordEnvelopeVersion)
	out = binary.BigEndian.AppendUint64(out, ref.Revision)
	out = append(out, nonce...)
	return aead.Seal(out, nonce, plaintext, recordAD(RecordEnvelopeVersion, ref)), nil
}

// OpenRecord authenticates and decrypts an envelope made by [SealRecord].
// ref.Revision is ignored: the revision is read from the envelope, checked
// as part of the associated data, and returned. Any failure, including an
// envelope sealed for another vault, collection or id, returns exactly
// [ErrTampered]. OpenRecord is safe for concurrent use.
func OpenRecord(k *Key, envelope []byte, ref RecordRef) (plaintext []byte, revision uint64, err error) {
	if len(envelope) < RecordEnvelopeOverhead || envelope[0] != RecordEnvelopeVersion {
		return nil, 0, ErrTampered
	}
	ref.Revision = binary.BigEndian.Uint64(envelope[1:9])
	nonce := envelope[9 : 9+NonceSize]
	aead, err := newAEAD(k)
	if err != nil {
		return nil, 0, err
	}
	pt, err := aead.Open(nil, nonce, envelope[9+NonceSize:], recordAD(envelope[0], ref))
	if err != nil {
		return nil, 0, ErrTampered
	}
	if pt == nil {
		pt = []byte{}
	}
	return pt, ref.Revision, nil
}

// RecordRevision returns the revision stored in clear in a record envelope,
// without decrypting or authenticating it: use it to route or order, and
// trust only the revision [OpenRecord] returns. A short envelope or an
// unknown version gives an error wrapping [ErrMalformed].
func RecordRevision(envelope []byte) (uint64, error) {
	if len(envelope) < RecordEnvelopeOverhead {
		return 0, fmt.Errorf("record revision: envelope of %d bytes is shorter than %d: %w", len(envelope), RecordEnvelopeOverhead, ErrMalformed)
	}
	if envelope[0] != RecordEnvelopeVersion {
		return 0, fmt.Errorf("record revision: unknown envelope version %d: %w", envelope[0], ErrMalformed)
	}
	return binary.BigEndian.Uint64(envelope[1:9]), nil
}

// KeyAD returns the associated data for a value sealed with [Seal] and
// stored at a store key inside a vault (counters, ledger entries, keyring
// entries, ...), so that a ciphertext copied to another key or vault fails
// to open. The layout is
//
//	lp("noydb key") || lp(vault) || lp(key)
//
// with lp as documented on [SealRecord].
func KeyAD(vault, key string) []byte {
	return appendKeyAD(make([]byte, 0, 3*8+len(keyDomain)+len(vault)+len(key)), vault, key)
}

// WrapKey seals the data key dk under the key-encryption key kek, bound to
// ad (for example KeyAD(vault, "_keyring/<user>")). The result is a [Seal]
// envelope whose associated data is lp("noydb wrapped key") || ad, so a
// wrapped key never opens as an ordinary sealed value and vice versa.
// WrapKey is safe for concurrent use.
func WrapKey(kek, dk *Key, ad []byte) ([]byte, error) {
	var (
		env []byte
		err error
	)
	if werr := dk.use(func(b []byte) { env, err = Seal(kek, b, wrapAD(ad)) }); werr != nil {
		return nil, fmt.Errorf("wrap key: %w", werr)
	}
	if err != nil {
		return nil, fmt.Errorf("wrap key: %w", err)
	}
	return env, nil
}

// UnwrapKey opens a key wrapped by [WrapKey] with the same kek and ad. Any
// failure returns exactly [ErrTampered]. UnwrapKey is safe for concurrent use.
func UnwrapKey(kek *Key, wrapped, ad []byte) (*Key, error) {
	pt, err := Open(kek, wrapped, wrapAD(ad))
	if err != nil {
		return nil, ErrTampered
	}
	defer clear(pt)
	if len(pt) != KeySize {
		return nil, ErrTampered
	}
	return newKey(pt), nil
}

// newAEAD returns the XChaCha20-Poly1305 AEAD for k, or ErrKeyWiped.
func newAEAD(k *Key) (cipher.AEAD, error) {
	var (
		aead cipher.AEAD
		err  error
	)
	if werr := k.use(func(b []byte) { aead, err = chacha20poly1305.NewX(b) }); werr != nil {
		return nil, werr
	}
	if err != nil {
		// Only possible for a key of the wrong length; ours is fixed.
		panic("crypto: xchacha20poly1305: " + err.Error())
	}
	return aead, nil
}

// sealAD is the AEAD associated data of a Seal envelope.
func sealAD(version byte, ad []byte) []byte {
	b := make([]byte, 0, 1+len(ad))
	b = append(b, version)
	return append(b, ad...)
}

// recordAD is the AEAD associated data of a SealRecord envelope.
func recordAD(version byte, ref RecordRef) []byte {
	b := make([]byte, 0, 1+4*8+len(recordDomain)+len(ref.Vault)+len(ref.Collection)+len(ref.ID)+8)
	b = append(b, version)
	b = appendLP(b, recordDomain)
	b = appendLP(b, ref.Vault)
	b = appendLP(b, ref.Collection)
	b = appendLP(b, ref.ID)
	return binary.BigEndian.AppendUint64(b, ref.Revision)
}

// wrapAD is the associated data WrapKey passes to Seal.
func wrapAD(ad []byte) []byte {
	b := make([]byte, 0, 8+len(wrappedDomain)+len(ad))
	b = appendLP(b, wrappedDomain)
	return append(b, ad...)
}

// appendLP appends s prefixed with its length as 8 bytes big-endian.
func appendLP(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}
