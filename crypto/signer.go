package crypto

import (
	"crypto/ed25519"
	"sync"
)

// Signer is an Ed25519 signing key held expanded, so that each signature
// costs one scalar multiplication instead of the two of Sign (which expands
// the seed every time). Make one with NewSigner for a key that signs many
// messages, such as a vault's ledger entries; Wipe clears it. It is safe
// for concurrent use.
type Signer struct {
	mu   sync.RWMutex
	priv ed25519.PrivateKey // nil once wiped
	pub  []byte
}

// NewSigner expands the signing key whose seed is seed (ErrKeyWiped for a
// wiped seed). The Signer is a separate copy: wipe it too.
func NewSigner(seed *Key) (*Signer, error) {
	s := &Signer{}
	if err := seed.use(func(b []byte) { s.priv = ed25519.NewKeyFromSeed(b) }); err != nil {
		return nil, err
	}
	s.pub = append([]byte(nil), s.priv.Public().(ed25519.PublicKey)...)
	return s, nil
}

// Public returns the Ed25519 public key.
func (s *Signer) Public() []byte { return s.pub }

// Sign returns the Ed25519 signature of msg, or ErrKeyWiped once s was wiped.
func (s *Signer) Sign(msg []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.priv == nil {
		return nil, ErrKeyWiped
	}
	return ed25519.Sign(s.priv, msg), nil
}

// Wipe overwrites the expanded key with zeros; later signatures fail with
// ErrKeyWiped. Wiping twice, or a nil Signer, is harmless.
func (s *Signer) Wipe() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.priv)
	s.priv = nil
}
