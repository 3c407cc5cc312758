package crypto_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

// TestSigner: a Signer signs as Sign does with the same seed, and refuses
// once wiped, as does NewSigner with a wiped seed.
func TestSigner(t *testing.T) {
	seed, err := crypto.GenerateKey()
	require.NoError(t, err)
	s, err := crypto.NewSigner(seed)
	require.NoError(t, err)
	pub, err := crypto.SigningPublicKey(seed)
	require.NoError(t, err)
	assert.Equal(t, pub, s.Public())
	want, err := crypto.Sign(seed, []byte("m"))
	require.NoError(t, err)
	got, err := s.Sign([]byte("m"))
	require.NoError(t, err)
	assert.Equal(t, want, got, "Ed25519 signatures are deterministic")
	assert.True(t, crypto.VerifySignature(pub, []byte("m"), got))

	s.Wipe()
	s.Wipe()
	_, err = s.Sign([]byte("m"))
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	seed.Wipe()
	_, err = crypto.NewSigner(seed)
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
}

// BenchmarkSign compares Sign, which expands the seed each time, with a
// Signer, which holds it expanded.
func BenchmarkSign(b *testing.B) {
	seed, err := crypto.GenerateKey()
	require.NoError(b, err)
	msg := make([]byte, 200)
	b.Run("Sign", func(b *testing.B) {
		for b.Loop() {
			_, _ = crypto.Sign(seed, msg)
		}
	})
	b.Run("Signer", func(b *testing.B) {
		s, err := crypto.NewSigner(seed)
		require.NoError(b, err)
		for b.Loop() {
			_, _ = s.Sign(msg)
		}
	})
}
