package crypto_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

// The vectors in testdata/vectors.json were produced by
// testdata/gen_vectors.py, an implementation independent of this package.
// They are published: tests compare against them and never rewrite them.

func TestVectorsSeal(t *testing.T) {
	for _, v := range loadVectors(t).Seal {
		k := crypto.KeyFromBytes(v.Key)
		got := crypto.SealWithNonce(k, v.Nonce, v.Plaintext, v.AD)
		assert.Equal(t, []byte(v.Envelope), got, v.Name)
		pt, err := crypto.Open(k, v.Envelope, v.AD)
		require.NoError(t, err, v.Name)
		assert.Equal(t, []byte(v.Plaintext), pt, v.Name)
	}
}

func TestVectorsSealRecord(t *testing.T) {
	for _, v := range loadVectors(t).SealRecord {
		k := crypto.KeyFromBytes(v.Key)
		ref := crypto.RecordRef{Vault: v.Vault, Collection: v.Collection, ID: v.ID, Revision: uint64(v.Revision)}
		got := crypto.SealRecordWithNonce(k, v.Nonce, v.Plaintext, ref)
		assert.Equal(t, []byte(v.Envelope), got, v.Name)

		rev, err := crypto.RecordRevision(v.Envelope)
		require.NoError(t, err, v.Name)
		assert.Equal(t, uint64(v.Revision), rev, v.Name)

		ref.Revision = 0
		pt, rev, err := crypto.OpenRecord(k, v.Envelope, ref)
		require.NoError(t, err, v.Name)
		assert.Equal(t, []byte(v.Plaintext), pt, v.Name)
		assert.Equal(t, uint64(v.Revision), rev, v.Name)
	}
}

// TestVectorsSealRecordGen checks the version 2 record envelope, which
// names its key generation, against the published vectors, and that the
// version 1 vectors still open and name no generation.
func TestVectorsSealRecordGen(t *testing.T) {
	for _, v := range loadVectors(t).SealRecordGen {
		k := crypto.KeyFromBytes(v.Key)
		ref := crypto.RecordRef{Vault: v.Vault, Collection: v.Collection, ID: v.ID, Revision: uint64(v.Revision), Generation: uint64(v.Generation)}
		got := crypto.SealRecordWithNonce(k, v.Nonce, v.Plaintext, ref)
		assert.Equal(t, []byte(v.Envelope), got, v.Name)
		assert.Equal(t, crypto.RecordEnvelopeVersionGen, v.Envelope[0], v.Name)

		rev, err := crypto.RecordRevision(v.Envelope)
		require.NoError(t, err, v.Name)
		assert.Equal(t, uint64(v.Revision), rev, v.Name)
		gen, err := crypto.RecordGeneration(v.Envelope)
		require.NoError(t, err, v.Name)
		assert.Equal(t, uint64(v.Generation), gen, v.Name)

		ref.Revision, ref.Generation = 0, 0
		pt, rev, err := crypto.OpenRecord(k, v.Envelope, ref)
		require.NoError(t, err, v.Name)
		assert.Equal(t, []byte(v.Plaintext), pt, v.Name)
		assert.Equal(t, uint64(v.Revision), rev, v.Name)
	}
	for _, v := range loadVectors(t).SealRecord {
		gen, err := crypto.RecordGeneration(v.Envelope)
		require.NoError(t, err, v.Name)
		assert.Zero(t, gen, v.Name)
	}
}

// TestVectorsSealRecordCol checks the version 3 record envelope, sealed
// with a collection's key derived from a generation's data key, against
// the published vectors: the derivation, the envelope, what RecordKeyOf
// reads, and that neither the data key nor another collection's key opens
// it.
func TestVectorsSealRecordCol(t *testing.T) {
	for _, v := range loadVectors(t).SealRecordCol {
		dk := crypto.KeyFromBytes(v.DataKey)
		ck := crypto.CollectionKey(dk, v.Collection)
		assert.True(t, sameKey(ck, crypto.KeyFromBytes(v.CollectionKey)), v.Name)
		ref := crypto.RecordRef{Vault: v.Vault, Collection: v.Collection, ID: v.ID, Revision: uint64(v.Revision),
			Generation: uint64(v.Generation), PerCollection: true}
		got := crypto.SealRecordWithNonce(ck, v.Nonce, v.Plaintext, ref)
		assert.Equal(t, []byte(v.Envelope), got, v.Name)
		assert.Equal(t, crypto.RecordEnvelopeVersionCol, v.Envelope[0], v.Name)

		gen, per, err := crypto.RecordKeyOf(v.Envelope)
		require.NoError(t, err, v.Name)
		assert.Equal(t, uint64(v.Generation), gen, v.Name)
		assert.True(t, per, v.Name)
		rev, err := crypto.RecordRevision(v.Envelope)
		require.NoError(t, err, v.Name)
		assert.Equal(t, uint64(v.Revision), rev, v.Name)

		ref.Revision, ref.Generation, ref.PerCollection = 0, 0, false
		pt, rev, err := crypto.OpenRecord(ck, v.Envelope, ref)
		require.NoError(t, err, v.Name)
		assert.Equal(t, []byte(v.Plaintext), pt, v.Name)
		assert.Equal(t, uint64(v.Revision), rev, v.Name)
		_, _, err = crypto.OpenRecord(dk, v.Envelope, ref)
		assert.ErrorIs(t, err, crypto.ErrTampered, v.Name)
		_, _, err = crypto.OpenRecord(crypto.CollectionKey(dk, v.Collection+"x"), v.Envelope, ref)
		assert.ErrorIs(t, err, crypto.ErrTampered, v.Name)

		// The same bytes relabelled version 2 (a store's swap) do not open.
		v2 := append([]byte{crypto.RecordEnvelopeVersionGen}, v.Envelope[1:]...)
		_, _, err = crypto.OpenRecord(ck, v2, ref)
		assert.ErrorIs(t, err, crypto.ErrTampered, v.Name)
	}
	for _, v := range loadVectors(t).SealRecordGen {
		gen, per, err := crypto.RecordKeyOf(v.Envelope)
		require.NoError(t, err, v.Name)
		assert.Equal(t, uint64(v.Generation), gen, v.Name)
		assert.False(t, per, v.Name)
	}
	// A collection's key names a generation.
	_, err := crypto.SealRecord(crypto.KeyFromBytes(make([]byte, 32)), nil, crypto.RecordRef{PerCollection: true})
	assert.ErrorIs(t, err, crypto.ErrMalformed)
}

func TestVectorsMAC(t *testing.T) {
	for _, v := range loadVectors(t).MAC {
		parts := make([][]byte, len(v.Parts))
		for i, p := range v.Parts {
			parts[i] = p
		}
		assert.Equal(t, []byte(v.MAC), crypto.KeyFromBytes(v.Key).MAC(parts...), v.Name)
	}
}

func TestVectorsDerive(t *testing.T) {
	for _, v := range loadVectors(t).Derive {
		got := crypto.KeyFromBytes(v.Key).Derive(v.Label)
		assert.Equal(t, []byte(v.Subkey), crypto.KeyBytes(got), v.Label)
	}
}

func TestVectorsDeriveUserKey(t *testing.T) {
	for _, v := range loadVectors(t).DeriveUserKey {
		p := crypto.KDFParams{Time: v.Time, MemoryKiB: v.MemoryKiB, Threads: v.Threads}
		k, err := crypto.DeriveUserKey(v.Secret, v.Salt, p)
		require.NoError(t, err, "%+v", p)
		assert.Equal(t, []byte(v.Key), crypto.KeyBytes(k), "%+v", p)
	}
}

func TestVectorsKeyAD(t *testing.T) {
	for _, v := range loadVectors(t).KeyAD {
		assert.Equal(t, []byte(v.AD), crypto.KeyAD(v.Vault, v.Key), "%q %q", v.Vault, v.Key)
	}
}

func TestVectorsUnwrapKey(t *testing.T) {
	for _, v := range loadVectors(t).WrapKey {
		kek := crypto.KeyFromBytes(v.KEK)
		got, err := crypto.UnwrapKey(kek, v.Wrapped, v.AD)
		require.NoError(t, err)
		assert.Equal(t, []byte(v.Key), crypto.KeyBytes(got))
	}
}

func TestVectorsHeader(t *testing.T) {
	for _, v := range loadVectors(t).Header {
		h, err := crypto.ParseHeader(v.Bytes)
		require.NoError(t, err)
		want := crypto.Header{Version: crypto.HeaderVersion, KDF: crypto.KDFParams{Time: v.Time, MemoryKiB: v.MemoryKiB, Threads: v.Threads}}
		copy(want.Salt[:], v.Salt)
		assert.Equal(t, want, h)
		b, err := want.MarshalBinary()
		require.NoError(t, err)
		assert.Equal(t, []byte(v.Bytes), b)
	}
}
