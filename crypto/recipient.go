package crypto

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// PublicKeySize is the length of an X25519 public key (a recipient) in bytes.
const PublicKeySize = 32

// SigningKeySize is the length of an Ed25519 public key in bytes.
const SigningKeySize = ed25519.PublicKeySize

// SignatureSize is the length of an Ed25519 signature in bytes.
const SignatureSize = ed25519.SignatureSize

// ErrBadPublicKey reports an X25519 public key that is not 32 bytes, or a
// point of small order (which would make every shared secret known).
var ErrBadPublicKey = errors.New("malformed X25519 public key")

// Text forms of identities and public keys (see EncodePublicKey).
const (
	publicKeyPrefix = "noydb-x25519-public:"
	identityPrefix  = "NOYDB-X25519-PRIVATE:"
	recipientLabel  = "noydb x25519 wrap v1"
)

// Identity is a person's X25519 key pair: keys wrapped for its public key
// (see WrapKeyTo) open with it. Like a Key, its private part is never
// printed and can be wiped.
type Identity struct {
	priv *Key
}

// GenerateIdentity returns a fresh X25519 key pair read from crypto/rand.
func GenerateIdentity() (*Identity, error) {
	k, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	return &Identity{priv: k}, nil
}

// IdentityFromKey returns the identity whose private scalar is k's bytes.
// The identity shares k: wiping one wipes the other.
func IdentityFromKey(k *Key) *Identity { return &Identity{priv: k} }

// Key returns the identity's private scalar as a Key (to wrap it with
// WrapKey). It is shared with the identity.
func (id *Identity) Key() *Key { return id.priv }

// Wipe overwrites the private key with zeros.
func (id *Identity) Wipe() { id.priv.Wipe() }

// String returns "crypto.Identity(REDACTED)".
func (id *Identity) String() string { return "crypto.Identity(REDACTED)" }

// GoString is String.
func (id *Identity) GoString() string { return id.String() }

// private returns the identity as an ecdh private key.
func (id *Identity) private() (*ecdh.PrivateKey, error) {
	if id == nil {
		return nil, ErrKeyWiped
	}
	var (
		pk  *ecdh.PrivateKey
		err error
	)
	if uerr := id.priv.use(func(b []byte) { pk, err = ecdh.X25519().NewPrivateKey(b) }); uerr != nil {
		return nil, uerr
	}
	return pk, err
}

// PublicKey returns the identity's public key (PublicKeySize bytes).
func (id *Identity) PublicKey() ([]byte, error) {
	pk, err := id.private()
	if err != nil {
		return nil, err
	}
	return pk.PublicKey().Bytes(), nil
}

// checkKey is a fixed private scalar used to test public keys for small order.
var checkKey = func() *ecdh.PrivateKey {
	var b [32]byte
	b[0] = 9
	k, err := ecdh.X25519().NewPrivateKey(b[:])
	if err != nil {
		panic(err)
	}
	return k
}()

// CheckPublicKey returns ErrBadPublicKey unless pub is a usable X25519
// public key: 32 bytes, not of small order.
func CheckPublicKey(pub []byte) error {
	if len(pub) != PublicKeySize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrBadPublicKey, len(pub), PublicKeySize)
	}
	p, err := ecdh.X25519().NewPublicKey(pub)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadPublicKey, err)
	}
	if _, err := checkKey.ECDH(p); err != nil {
		return fmt.Errorf("%w: small-order point", ErrBadPublicKey)
	}
	return nil
}

// recipientKEK derives the key-encryption key of one wrap from the shared
// secret, binding both public keys.
func recipientKEK(shared, ephPub, pub []byte) (*Key, error) {
	salt := make([]byte, 0, 2*PublicKeySize)
	salt = append(append(salt, ephPub...), pub...)
	out, err := hkdf.Key(sha256.New, shared, salt, recipientLabel, KeySize)
	if err != nil {
		return nil, err
	}
	k := newKey(out)
	clear(out)
	return k, nil
}

// WrapKeyTo wraps k for the holder of the X25519 public key pub, as age
// does for its recipients: an ephemeral X25519 key pair, the shared secret
// through HKDF-SHA256 (salted with both public keys), and WrapKey with that
// key and ad. The result is the ephemeral public key followed by the
// WrapKey envelope. A bad pub is ErrBadPublicKey.
func WrapKeyTo(pub []byte, k *Key, ad []byte) ([]byte, error) {
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	p, _ := ecdh.X25519().NewPublicKey(pub)
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("wrap key: %w", err)
	}
	shared, err := eph.ECDH(p)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPublicKey, err)
	}
	defer clear(shared)
	ephPub := eph.PublicKey().Bytes()
	kek, err := recipientKEK(shared, ephPub, pub)
	if err != nil {
		return nil, err
	}
	defer kek.Wipe()
	env, err := WrapKey(kek, k, ad)
	if err != nil {
		return nil, err
	}
	return append(ephPub, env...), nil
}

// UnwrapKeyWith opens a key wrapped by WrapKeyTo for id's public key, with
// the same ad. Any failure of the wrapped bytes returns exactly ErrTampered.
func UnwrapKeyWith(id *Identity, wrapped, ad []byte) (*Key, error) {
	priv, err := id.private()
	if err != nil {
		return nil, err
	}
	if len(wrapped) < PublicKeySize {
		return nil, ErrTampered
	}
	ephPub := wrapped[:PublicKeySize]
	p, err := ecdh.X25519().NewPublicKey(ephPub)
	if err != nil {
		return nil, ErrTampered
	}
	shared, err := priv.ECDH(p)
	if err != nil {
		return nil, ErrTampered
	}
	defer clear(shared)
	kek, err := recipientKEK(shared, ephPub, priv.PublicKey().Bytes())
	if err != nil {
		return nil, ErrTampered
	}
	defer kek.Wipe()
	return UnwrapKey(kek, wrapped[PublicKeySize:], ad)
}

// EncodePublicKey returns the text form of an X25519 public key,
// "noydb-x25519-public:" and the key in unpadded base64url.
func EncodePublicKey(pub []byte) string {
	return publicKeyPrefix + base64.RawURLEncoding.EncodeToString(pub)
}

// ParsePublicKey reads the text form of EncodePublicKey; anything else is
// ErrBadPublicKey.
func ParsePublicKey(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), publicKeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: want the prefix %q", ErrBadPublicKey, publicKeyPrefix)
	}
	pub, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPublicKey, err)
	}
	if err := CheckPublicKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// EncodeIdentity returns the text form of an identity's private key, for a
// file only its owner can read: "NOYDB-X25519-PRIVATE:" and the scalar in
// unpadded base64url. It is a secret: never log it.
func EncodeIdentity(id *Identity) (string, error) {
	var s string
	if err := id.priv.use(func(b []byte) { s = identityPrefix + base64.RawURLEncoding.EncodeToString(b) }); err != nil {
		return "", err
	}
	return s, nil
}

// ParseIdentity reads the text form of EncodeIdentity (ErrMalformed otherwise).
func ParseIdentity(s string) (*Identity, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(s), identityPrefix)
	if !ok {
		return nil, fmt.Errorf("identity: %w: want the prefix %q", ErrMalformed, identityPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != KeySize {
		clear(b)
		return nil, fmt.Errorf("identity: %w", ErrMalformed)
	}
	k := newKey(b)
	clear(b)
	return &Identity{priv: k}, nil
}

// SigningPublicKey returns the Ed25519 public key of the signing key whose
// seed is k.
func SigningPublicKey(seed *Key) ([]byte, error) {
	var pub []byte
	if err := seed.use(func(b []byte) {
		priv := ed25519.NewKeyFromSeed(b)
		pub = append([]byte(nil), priv.Public().(ed25519.PublicKey)...)
		clear(priv)
	}); err != nil {
		return nil, err
	}
	return pub, nil
}

// Sign returns the Ed25519 signature of msg by the signing key whose seed is k.
func Sign(seed *Key, msg []byte) ([]byte, error) {
	var sig []byte
	if err := seed.use(func(b []byte) {
		priv := ed25519.NewKeyFromSeed(b)
		sig = ed25519.Sign(priv, msg)
		clear(priv)
	}); err != nil {
		return nil, err
	}
	return sig, nil
}

// VerifySignature reports whether sig is pub's Ed25519 signature of msg.
// A pub or sig of the wrong length is false.
func VerifySignature(pub, msg, sig []byte) bool {
	return len(pub) == SigningKeySize && len(sig) == SignatureSize && ed25519.Verify(pub, msg, sig)
}
