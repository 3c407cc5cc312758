package crypto

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"golang.org/x/crypto/chacha20poly1305"
)

// Envelope format constants.
const (
	// EnvelopeVersion is the version byte of envelopes made by [Seal].
	EnvelopeVersion uint8 = 1
	// RecordEnvelopeVersion is the version byte of envelopes made by
	// [SealRecord] for a [RecordRef] without a Generation: the layout that
	// predates key generations.
	RecordEnvelopeVersion uint8 = 1
	// RecordEnvelopeVersionGen is the version byte of envelopes made by
	// [SealRecord] for a [RecordRef] naming a Generation: the layout stores
	// the generation of the key in clear and authenticates it.
	RecordEnvelopeVersionGen uint8 = 2
	// RecordEnvelopeVersionCol is the version byte of envelopes made by
	// [SealRecord] for a [RecordRef] with PerCollection set: the layout of
	// version 2, sealed with the collection's own key of the generation
	// ([CollectionKey]) rather than the generation's data key.
	RecordEnvelopeVersionCol uint8 = 3
	// NonceSize is the XChaCha20-Poly1305 nonce length in bytes.
	NonceSize = chacha20poly1305.NonceSizeX
	// TagSize is the Poly1305 authentication tag length in bytes.
	TagSize = chacha20poly1305.Overhead
	// EnvelopeOverhead is how many bytes [Seal] adds to a plaintext.
	EnvelopeOverhead = 1 + NonceSize + TagSize
	// RecordEnvelopeOverhead is how many bytes [SealRecord] adds to a
	// plaintext in a version 1 envelope (no generation), the shortest record
	// envelope.
	RecordEnvelopeOverhead = 1 + 8 + NonceSize + TagSize
	// RecordEnvelopeOverheadGen is how many bytes [SealRecord] adds to a
	// plaintext in a version 2 envelope (one naming its key generation).
	RecordEnvelopeOverheadGen = RecordEnvelopeOverhead + 8
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
	// Generation is the generation of the key that seals the record (a
	// vault's data keys are numbered from 1 and a rotation adds the next).
	// Zero names none: SealRecord then writes the version 1 envelope, which
	// predates generations. Stored in clear and authenticated; read it with
	// [RecordGeneration] to pick the key, before opening.
	Generation uint64
	// PerCollection says that the key sealing the record is the
	// collection's own key of the generation ([CollectionKey] of the
	// generation's data key), not the data key itself: SealRecord then
	// writes the version 3 envelope (Generation must not be zero). Read
	// it with [RecordKeyOf] before opening.
	PerCollection bool
}

// collectionLabel is the HKDF label of a collection's key, followed by
// the collection's name.
const collectionLabel = "noydb collection v1\x00"

// CollectionKey returns the key of collection derived from a data key dk:
// HKDF-SHA256 of dk with the label "noydb collection v1", a zero byte and
// the collection's name (see [Key.Derive]). Whoever holds dk can derive
// every collection's key; whoever holds one collection's key cannot learn
// dk or another collection's key. The caller wipes the result.
func CollectionKey(dk *Key, collection string) *Key {
	return dk.Derive(collectionLabel + collection)
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
	out := make([]byte, 1+NonceSize, EnvelopeOverhead+len(plaintext))
	out[0] = EnvelopeVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return sealAfter(k, out, plaintext, ad)
}

// sealWithNonce is Seal with a caller-chosen nonce. Only Seal (random
// nonce) and the known-answer tests may call it.
func sealWithNonce(k *Key, nonce, plaintext, ad []byte) ([]byte, error) {
	out := make([]byte, 0, EnvelopeOverhead+len(plaintext))
	out = append(out, EnvelopeVersion)
	out = append(out, nonce...)
	return sealAfter(k, out, plaintext, ad)
}

// sealAfter completes a Seal envelope whose version and nonce are out.
func sealAfter(k *Key, out, plaintext, ad []byte) ([]byte, error) {
	bp := adBuffers.Get().(*[]byte)
	full := append(append((*bp)[:0], out[0]), ad...)
	out, err := sealEnvelope(k, out, out[1:1+NonceSize], plaintext, full)
	*bp = full[:0]
	adBuffers.Put(bp)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return out, nil
}

// sealEnvelope appends to out the ciphertext and tag of plaintext under k,
// with nonce and the associated data ad.
func sealEnvelope(k *Key, out, nonce, plaintext, ad []byte) ([]byte, error) {
	err := k.withAEAD(func(a cipher.AEAD) { out = a.Seal(out, nonce, plaintext, ad) })
	return out, err
}

// openEnvelope authenticates and decrypts ciphertext (with its tag) under
// k, with nonce and ad: ErrKeyWiped, or ErrTampered for any failure.
func openEnvelope(k *Key, nonce, ciphertext, ad []byte) ([]byte, error) {
	var (
		pt   []byte
		oerr error
	)
	if err := k.withAEAD(func(a cipher.AEAD) { pt, oerr = a.Open(nil, nonce, ciphertext, ad) }); err != nil {
		return nil, err
	}
	if oerr != nil {
		return nil, ErrTampered
	}
	if pt == nil {
		pt = []byte{}
	}
	return pt, nil
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
	bp := adBuffers.Get().(*[]byte)
	full := append(append((*bp)[:0], envelope[0]), ad...)
	pt, err := openEnvelope(k, envelope[1:1+NonceSize], envelope[1+NonceSize:], full)
	*bp = full[:0]
	adBuffers.Put(bp)
	return pt, err
}

// SealRecord encrypts a record's plaintext under k, binding it to the
// record's vault, collection, id and revision, and to the key's generation
// when ref names one. For a ref with a Generation the envelope layout,
// version 2, is
//
//	[1]  record envelope version (2)
//	[8]  revision, big-endian, in clear
//	[8]  key generation, big-endian, in clear
//	[24] nonce
//	[n+16] ciphertext and tag
//
// with the AEAD associated data
//
//	version byte || lp("noydb record") || lp(vault) || lp(collection) || lp(id) || revision (8 bytes) || generation (8 bytes)
//
// For a ref with PerCollection set the envelope is version 3: the layout
// and associated data of version 2 with the version byte 3, sealed with
// the collection's key of the generation ([CollectionKey]).
//
// For a ref without one (Generation 0) it is version 1, the layout made
// before key generations:
//
//	[1]  record envelope version (1)
//	[8]  revision, big-endian, in clear
//	[24] nonce
//	[n+16] ciphertext and tag
//
// with the associated data
//
//	version byte || lp("noydb record") || lp(vault) || lp(collection) || lp(id) || revision (8 bytes, big-endian)
//
// where lp(s) is the length of s as 8 bytes big-endian followed by s. The
// domain label keeps it distinct from [KeyAD]. SealRecord is safe for
// concurrent use.
func SealRecord(k *Key, plaintext []byte, ref RecordRef) ([]byte, error) {
	return sealRecordWithNonce(k, nil, plaintext, ref)
}

// sealRecordWithNonce is SealRecord with a caller-chosen nonce (nil: a
// fresh random one). Only SealRecord (random nonce) and the known-answer
// tests may choose it.
func sealRecordWithNonce(k *Key, nonce, plaintext []byte, ref RecordRef) ([]byte, error) {
	version := RecordEnvelopeVersion
	switch {
	case ref.PerCollection && ref.Generation == 0:
		return nil, fmt.Errorf("seal record: a collection's key names a generation: %w", ErrMalformed)
	case ref.PerCollection:
		version = RecordEnvelopeVersionCol
	case ref.Generation != 0:
		version = RecordEnvelopeVersionGen
	}
	out := make([]byte, 0, RecordEnvelopeOverheadGen+len(plaintext))
	out = append(out, version)
	out = binary.BigEndian.AppendUint64(out, ref.Revision)
	if version != RecordEnvelopeVersion {
		out = binary.BigEndian.AppendUint64(out, ref.Generation)
	}
	at := len(out)
	if nonce == nil {
		out = out[:at+NonceSize]
		if _, err := rand.Read(out[at:]); err != nil {
			return nil, fmt.Errorf("seal record: %w", err)
		}
	} else {
		out = append(out, nonce...)
	}
	bp := adBuffers.Get().(*[]byte)
	ad := appendRecordAD((*bp)[:0], version, ref)
	out, err := sealEnvelope(k, out, out[at:at+NonceSize], plaintext, ad)
	*bp = ad[:0]
	adBuffers.Put(bp)
	if err != nil {
		return nil, fmt.Errorf("seal record: %w", err)
	}
	return out, nil
}

// recordHeader parses the clear part of a record envelope: its version,
// revision, generation (0 for version 1) and the offset of the nonce.
func recordHeader(envelope []byte) (version byte, rev, gen uint64, at int, ok bool) {
	if len(envelope) < RecordEnvelopeOverhead {
		return 0, 0, 0, 0, false
	}
	switch envelope[0] {
	case RecordEnvelopeVersion:
		return envelope[0], binary.BigEndian.Uint64(envelope[1:9]), 0, 9, true
	case RecordEnvelopeVersionGen, RecordEnvelopeVersionCol:
		if len(envelope) < RecordEnvelopeOverheadGen {
			return 0, 0, 0, 0, false
		}
		gen = binary.BigEndian.Uint64(envelope[9:17])
		if gen == 0 {
			return 0, 0, 0, 0, false // versions 2 and 3 always name one
		}
		return envelope[0], binary.BigEndian.Uint64(envelope[1:9]), gen, 17, true
	}
	return 0, 0, 0, 0, false
}

// OpenRecord authenticates and decrypts an envelope made by [SealRecord],
// of any version. ref.Revision, ref.Generation and ref.PerCollection are
// ignored: they are read from the envelope, checked as part of the
// associated data, and the revision is returned (pick k by [RecordKeyOf]
// first). Any failure,
// including an envelope sealed for another vault, collection or id, or a
// generation changed in clear, returns exactly [ErrTampered]. OpenRecord
// is safe for concurrent use.
func OpenRecord(k *Key, envelope []byte, ref RecordRef) (plaintext []byte, revision uint64, err error) {
	version, rev, gen, at, ok := recordHeader(envelope)
	if !ok {
		return nil, 0, ErrTampered
	}
	ref.Revision, ref.Generation = rev, gen
	bp := adBuffers.Get().(*[]byte)
	ad := appendRecordAD((*bp)[:0], version, ref)
	pt, err := openEnvelope(k, envelope[at:at+NonceSize], envelope[at+NonceSize:], ad)
	*bp = ad[:0]
	adBuffers.Put(bp)
	if err != nil {
		return nil, 0, err
	}
	return pt, ref.Revision, nil
}

// RecordRevision returns the revision stored in clear in a record envelope,
// without decrypting or authenticating it: use it to route or order, and
// trust only the revision [OpenRecord] returns. A short envelope or an
// unknown version gives an error wrapping [ErrMalformed].
func RecordRevision(envelope []byte) (uint64, error) {
	_, rev, _, err := recordClear(envelope, "record revision")
	return rev, err
}

// RecordGeneration returns the key generation a record envelope names in
// clear, without decrypting or authenticating it: 0 for a version 1
// envelope, which predates generations (a vault reads it as sealed by its
// first key). Use it to pick the key to open the envelope with; a changed
// generation then fails to open. A short envelope or an unknown version
// gives an error wrapping [ErrMalformed].
func RecordGeneration(envelope []byte) (uint64, error) {
	_, _, gen, err := recordClear(envelope, "record generation")
	return gen, err
}

// RecordKeyOf returns which key opens a record envelope, read in clear
// without decrypting or authenticating it: the generation (0 for a
// version 1 envelope, which predates generations) and whether the key is
// the collection's own key of that generation ([CollectionKey], a version
// 3 envelope) rather than the generation's data key. A changed byte then
// fails to open. A short envelope or an unknown version gives an error
// wrapping [ErrMalformed].
func RecordKeyOf(envelope []byte) (gen uint64, perCollection bool, err error) {
	version, _, gen, err := recordClear(envelope, "record key")
	return gen, version == RecordEnvelopeVersionCol, err
}

// recordClear is recordHeader with errors for RecordRevision and
// RecordGeneration.
func recordClear(envelope []byte, op string) (byte, uint64, uint64, error) {
	if len(envelope) < RecordEnvelopeOverhead {
		return 0, 0, 0, fmt.Errorf("%s: envelope of %d bytes is shorter than %d: %w", op, len(envelope), RecordEnvelopeOverhead, ErrMalformed)
	}
	version, rev, gen, _, ok := recordHeader(envelope)
	if !ok {
		if envelope[0] == RecordEnvelopeVersionGen || envelope[0] == RecordEnvelopeVersionCol {
			return 0, 0, 0, fmt.Errorf("%s: version %d envelope too short or without a generation: %w", op, envelope[0], ErrMalformed)
		}
		return 0, 0, 0, fmt.Errorf("%s: unknown envelope version %d: %w", op, envelope[0], ErrMalformed)
	}
	return version, rev, gen, nil
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

// appendRecordAD appends the AEAD associated data of a record envelope
// of version to b.
func appendRecordAD(b []byte, version byte, ref RecordRef) []byte {
	b = append(b, version)
	b = appendLP(b, recordDomain)
	b = appendLP(b, ref.Vault)
	b = appendLP(b, ref.Collection)
	b = appendLP(b, ref.ID)
	b = binary.BigEndian.AppendUint64(b, ref.Revision)
	if version != RecordEnvelopeVersion {
		b = binary.BigEndian.AppendUint64(b, ref.Generation)
	}
	return b
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
