package crypto_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

func TestWrapKeyToRoundTrip(t *testing.T) {
	id, err := crypto.GenerateIdentity()
	require.NoError(t, err)
	pub, err := id.PublicKey()
	require.NoError(t, err)
	dk, err := crypto.GenerateKey()
	require.NoError(t, err)
	w, err := crypto.WrapKeyTo(pub, dk, []byte("ad"))
	require.NoError(t, err)
	got, err := crypto.UnwrapKeyWith(id, w, []byte("ad"))
	require.NoError(t, err)
	assert.Equal(t, dk.MAC([]byte("x")), got.MAC([]byte("x")))

	_, err = crypto.UnwrapKeyWith(id, w, []byte("other"))
	assert.ErrorIs(t, err, crypto.ErrTampered)
	other, err := crypto.GenerateIdentity()
	require.NoError(t, err)
	_, err = crypto.UnwrapKeyWith(other, w, []byte("ad"))
	assert.ErrorIs(t, err, crypto.ErrTampered)
	w[len(w)-1] ^= 1
	_, err = crypto.UnwrapKeyWith(id, w, []byte("ad"))
	assert.ErrorIs(t, err, crypto.ErrTampered)
	_, err = crypto.UnwrapKeyWith(id, w[:10], []byte("ad"))
	assert.ErrorIs(t, err, crypto.ErrTampered)
}

func TestCheckPublicKey(t *testing.T) {
	_, err := crypto.WrapKeyTo(make([]byte, 31), nil, nil)
	assert.ErrorIs(t, err, crypto.ErrBadPublicKey)
	// The all-zero point and the point 1 are of small order.
	assert.ErrorIs(t, crypto.CheckPublicKey(make([]byte, 32)), crypto.ErrBadPublicKey)
	one := make([]byte, 32)
	one[0] = 1
	assert.ErrorIs(t, crypto.CheckPublicKey(one), crypto.ErrBadPublicKey)
	_, err = crypto.ParsePublicKey("nope")
	assert.ErrorIs(t, err, crypto.ErrBadPublicKey)
}

func TestIdentityText(t *testing.T) {
	id, err := crypto.GenerateIdentity()
	require.NoError(t, err)
	s, err := crypto.EncodeIdentity(id)
	require.NoError(t, err)
	back, err := crypto.ParseIdentity(s)
	require.NoError(t, err)
	p1, _ := id.PublicKey()
	p2, _ := back.PublicKey()
	assert.Equal(t, p1, p2)
	pub, err := crypto.ParsePublicKey(crypto.EncodePublicKey(p1))
	require.NoError(t, err)
	assert.Equal(t, p1, pub)
	_, err = crypto.ParseIdentity(s[:len(s)-2])
	assert.ErrorIs(t, err, crypto.ErrMalformed)
	assert.NotContains(t, id.String(), s)
}

func TestSignVerify(t *testing.T) {
	seed, err := crypto.GenerateKey()
	require.NoError(t, err)
	pub, err := crypto.SigningPublicKey(seed)
	require.NoError(t, err)
	sig, err := crypto.Sign(seed, []byte("msg"))
	require.NoError(t, err)
	assert.True(t, crypto.VerifySignature(pub, []byte("msg"), sig))
	assert.False(t, crypto.VerifySignature(pub, []byte("msG"), sig))
	assert.False(t, crypto.VerifySignature(pub[:5], []byte("msg"), sig))
}
