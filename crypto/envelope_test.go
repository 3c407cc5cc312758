package crypto_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/race"
)

func randomBytes(tb testing.TB, n int) []byte {
	tb.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(tb, err)
	return b
}

func TestSealOpenRoundTrip(t *testing.T) {
	k := newKey(t)
	for _, n := range []int{0, 1, 63, 64, 65, 1024, 1 << 16} {
		pt := randomBytes(t, n)
		ad := crypto.KeyAD("books", "_sequences/invoices")
		env, err := crypto.Seal(k, pt, ad)
		require.NoError(t, err)
		assert.Len(t, env, n+crypto.EnvelopeOverhead)
		assert.Equal(t, crypto.EnvelopeVersion, env[0])
		got, err := crypto.Open(k, env, ad)
		require.NoError(t, err)
		assert.Equal(t, pt, got)
	}
}

func TestSealNilAD(t *testing.T) {
	k := newKey(t)
	env, err := crypto.Seal(k, []byte("x"), nil)
	require.NoError(t, err)
	got, err := crypto.Open(k, env, []byte{})
	require.NoError(t, err, "nil and empty ad are the same associated data")
	assert.Equal(t, []byte("x"), got)
}

func TestSealFreshNonce(t *testing.T) {
	k := newKey(t)
	pt := []byte("same plaintext")
	a, err := crypto.Seal(k, pt, nil)
	require.NoError(t, err)
	b, err := crypto.Seal(k, pt, nil)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
	assert.NotEqual(t, a[1:1+crypto.NonceSize], b[1:1+crypto.NonceSize])

	ref := crypto.RecordRef{Vault: "v", Collection: "c", ID: "1", Revision: 1}
	ra, err := crypto.SealRecord(k, pt, ref)
	require.NoError(t, err)
	rb, err := crypto.SealRecord(k, pt, ref)
	require.NoError(t, err)
	assert.NotEqual(t, ra, rb)
}

func TestOpenWrongKeyOrAD(t *testing.T) {
	k := newKey(t)
	ad := crypto.KeyAD("books", "_ledger/1")
	env, err := crypto.Seal(k, []byte("entry"), ad)
	require.NoError(t, err)

	_, err = crypto.Open(newKey(t), env, ad)
	assert.Same(t, crypto.ErrTampered, err) // the exact sentinel, unwrapped
	for _, other := range [][]byte{nil, crypto.KeyAD("books", "_ledger/2"), crypto.KeyAD("books2", "_ledger/1"), append(ad, 0)} {
		_, err = crypto.Open(k, env, other)
		assert.ErrorIs(t, err, crypto.ErrTampered)
	}
}

func TestOpenEveryBitFlip(t *testing.T) {
	k := newKey(t)
	ad := []byte("ad")
	env, err := crypto.Seal(k, randomBytes(t, 1024), ad)
	require.NoError(t, err)
	flipped := make([]byte, len(env))
	for bit := range len(env) * 8 {
		copy(flipped, env)
		flipped[bit/8] ^= 1 << (bit % 8)
		pt, err := crypto.Open(k, flipped, ad)
		if !assert.ErrorIs(t, err, crypto.ErrTampered, "bit %d", bit) || !assert.Nil(t, pt) {
			return
		}
	}
}

func TestOpenTruncated(t *testing.T) {
	k := newKey(t)
	env, err := crypto.Seal(k, []byte("hello"), nil)
	require.NoError(t, err)
	for n := range len(env) {
		_, err := crypto.Open(k, env[:n], nil)
		assert.ErrorIs(t, err, crypto.ErrTampered, "length %d", n)
	}
	_, err = crypto.Open(k, nil, nil)
	assert.ErrorIs(t, err, crypto.ErrTampered)
	_, err = crypto.Open(k, append(bytes.Clone(env), 0), nil)
	assert.ErrorIs(t, err, crypto.ErrTampered, "trailing byte")
}

func TestOpenUnknownVersion(t *testing.T) {
	k := newKey(t)
	env, err := crypto.Seal(k, []byte("hello"), nil)
	require.NoError(t, err)
	for _, v := range []byte{0, 2, 0xff} {
		env[0] = v
		_, err := crypto.Open(k, env, nil)
		assert.ErrorIs(t, err, crypto.ErrTampered)
	}
}

func TestSealRecordRoundTrip(t *testing.T) {
	k := newKey(t)
	ref := crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "INV-7", Revision: 42}
	pt := []byte(`{"total":"42.00"}`)
	env, err := crypto.SealRecord(k, pt, ref)
	require.NoError(t, err)
	assert.Len(t, env, len(pt)+crypto.RecordEnvelopeOverhead)

	rev, err := crypto.RecordRevision(env)
	require.NoError(t, err)
	assert.Equal(t, uint64(42), rev)

	lookup := ref
	lookup.Revision = 7 // ignored on input
	got, rev, err := crypto.OpenRecord(k, env, lookup)
	require.NoError(t, err)
	assert.Equal(t, pt, got)
	assert.Equal(t, uint64(42), rev)

	empty, err := crypto.SealRecord(k, nil, ref)
	require.NoError(t, err)
	got, _, err = crypto.OpenRecord(k, empty, ref)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestOpenRecordRelabelled(t *testing.T) {
	k := newKey(t)
	ref := crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "7", Revision: 3}
	env, err := crypto.SealRecord(k, []byte("payload"), ref)
	require.NoError(t, err)

	for name, other := range map[string]crypto.RecordRef{
		"vault":                 {Vault: "books2", Collection: "invoices", ID: "7"},
		"collection":            {Vault: "books", Collection: "receipts", ID: "7"},
		"id":                    {Vault: "books", Collection: "invoices", ID: "8"},
		"vault/collection edge": {Vault: "booksi", Collection: "nvoices", ID: "7"},
		"collection/id edge":    {Vault: "books", Collection: "invoices7", ID: ""},
		"empty":                 {},
	} {
		_, _, err := crypto.OpenRecord(k, env, other)
		assert.ErrorIs(t, err, crypto.ErrTampered, name)
	}

	for _, rev := range []uint64{0, 2, 4, 1 << 63} {
		relabelled := bytes.Clone(env)
		binary.BigEndian.PutUint64(relabelled[1:9], rev)
		_, _, err := crypto.OpenRecord(k, relabelled, ref)
		assert.ErrorIs(t, err, crypto.ErrTampered, "revision %d", rev)
	}

	_, _, err = crypto.OpenRecord(newKey(t), env, ref)
	assert.ErrorIs(t, err, crypto.ErrTampered, "wrong key")
}

func TestOpenRecordEveryBitFlip(t *testing.T) {
	k := newKey(t)
	ref := crypto.RecordRef{Vault: "v", Collection: "c", ID: "id", Revision: 9}
	env, err := crypto.SealRecord(k, randomBytes(t, 1024), ref)
	require.NoError(t, err)
	flipped := make([]byte, len(env))
	for bit := range len(env) * 8 {
		copy(flipped, env)
		flipped[bit/8] ^= 1 << (bit % 8)
		pt, _, err := crypto.OpenRecord(k, flipped, ref)
		if !assert.ErrorIs(t, err, crypto.ErrTampered, "bit %d", bit) || !assert.Nil(t, pt) {
			return
		}
	}
}

func TestOpenRecordTruncated(t *testing.T) {
	k := newKey(t)
	ref := crypto.RecordRef{Vault: "v", Collection: "c", ID: "id", Revision: 1}
	env, err := crypto.SealRecord(k, []byte("hello"), ref)
	require.NoError(t, err)
	for n := range len(env) {
		_, _, err := crypto.OpenRecord(k, env[:n], ref)
		assert.ErrorIs(t, err, crypto.ErrTampered, "length %d", n)
	}
	_, _, err = crypto.OpenRecord(k, nil, ref)
	assert.ErrorIs(t, err, crypto.ErrTampered)
}

func TestRecordRevisionMalformed(t *testing.T) {
	k := newKey(t)
	env, err := crypto.SealRecord(k, nil, crypto.RecordRef{Revision: 5})
	require.NoError(t, err)
	rev, err := crypto.RecordRevision(env)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), rev)

	for _, b := range [][]byte{nil, {}, env[:crypto.RecordEnvelopeOverhead-1]} {
		_, err := crypto.RecordRevision(b)
		assert.ErrorIs(t, err, crypto.ErrMalformed)
	}
	bad := bytes.Clone(env)
	bad[0] = 9
	_, err = crypto.RecordRevision(bad)
	assert.ErrorIs(t, err, crypto.ErrMalformed)
}

// TestRecordGeneration: a version 2 envelope names its generation in clear
// and authenticates it: the same envelope with another generation, or
// moved to the version 1 layout, does not open; a version 2 envelope
// naming generation 0 is malformed.
func TestRecordGeneration(t *testing.T) {
	k := newKey(t)
	ref := crypto.RecordRef{Vault: "v", Collection: "c", ID: "id", Revision: 3, Generation: 2}
	env, err := crypto.SealRecord(k, []byte("body"), ref)
	require.NoError(t, err)
	assert.Len(t, env, 4+crypto.RecordEnvelopeOverheadGen)
	gen, err := crypto.RecordGeneration(env)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), gen)
	pt, rev, err := crypto.OpenRecord(k, env, crypto.RecordRef{Vault: "v", Collection: "c", ID: "id", Generation: 9})
	require.NoError(t, err, "the ref's generation is ignored: the envelope's is used")
	assert.Equal(t, []byte("body"), pt)
	assert.Equal(t, uint64(3), rev)

	other := bytes.Clone(env)
	other[16] = 3 // generation 3 in clear
	gen, err = crypto.RecordGeneration(other)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), gen)
	_, _, err = crypto.OpenRecord(k, other, ref)
	assert.ErrorIs(t, err, crypto.ErrTampered)

	zero := bytes.Clone(env)
	zero[16] = 0
	_, err = crypto.RecordGeneration(zero)
	assert.ErrorIs(t, err, crypto.ErrMalformed)
	_, _, err = crypto.OpenRecord(k, zero, ref)
	assert.ErrorIs(t, err, crypto.ErrTampered)

	// The version 1 layout of the same bytes, without the generation.
	v1 := append([]byte{crypto.RecordEnvelopeVersion}, env[1:9]...)
	v1 = append(v1, env[17:]...)
	_, _, err = crypto.OpenRecord(k, v1, ref)
	assert.ErrorIs(t, err, crypto.ErrTampered)

	_, err = crypto.RecordGeneration(env[:crypto.RecordEnvelopeOverheadGen-1])
	assert.ErrorIs(t, err, crypto.ErrMalformed)
}

func TestEnvelopeKindsDoNotCross(t *testing.T) {
	k := newKey(t)
	ref := crypto.RecordRef{Vault: "v", Collection: "c", ID: "id", Revision: 1}
	rec, err := crypto.SealRecord(k, []byte("x"), ref)
	require.NoError(t, err)
	_, err = crypto.Open(k, rec, nil)
	assert.ErrorIs(t, err, crypto.ErrTampered, "record envelope opened as plain envelope")

	ad := crypto.KeyAD("v", "_keyring/alice")
	plain, err := crypto.Seal(k, bytes.Repeat([]byte{1}, crypto.KeySize), ad)
	require.NoError(t, err)
	_, _, err = crypto.OpenRecord(k, plain, ref)
	assert.ErrorIs(t, err, crypto.ErrTampered, "plain envelope opened as record envelope")
	_, err = crypto.UnwrapKey(k, plain, ad)
	assert.ErrorIs(t, err, crypto.ErrTampered, "plain envelope unwrapped as key")

	wrapped, err := crypto.WrapKey(k, newKey(t), ad)
	require.NoError(t, err)
	_, err = crypto.Open(k, wrapped, ad)
	assert.ErrorIs(t, err, crypto.ErrTampered, "wrapped key opened as plain envelope")
}

func TestKeyAD(t *testing.T) {
	assert.NotEqual(t, crypto.KeyAD("ab", "c"), crypto.KeyAD("a", "bc"))
	assert.NotEqual(t, crypto.KeyAD("", "ab"), crypto.KeyAD("ab", ""))
	assert.Equal(t, crypto.KeyAD("v", "k"), crypto.KeyAD("v", "k"))
}

func TestWrapUnwrapKey(t *testing.T) {
	kek, dk := newKey(t), newKey(t)
	ad := crypto.KeyAD("books", "_keyring/alice")
	wrapped, err := crypto.WrapKey(kek, dk, ad)
	require.NoError(t, err)
	assert.Len(t, wrapped, crypto.KeySize+crypto.EnvelopeOverhead)

	got, err := crypto.UnwrapKey(kek, wrapped, ad)
	require.NoError(t, err)
	assert.True(t, sameKey(dk, got))

	_, err = crypto.UnwrapKey(newKey(t), wrapped, ad)
	assert.ErrorIs(t, err, crypto.ErrTampered, "wrong kek")
	_, err = crypto.UnwrapKey(kek, wrapped, crypto.KeyAD("books", "_keyring/bob"))
	assert.ErrorIs(t, err, crypto.ErrTampered, "wrong ad")
	_, err = crypto.UnwrapKey(kek, wrapped[:len(wrapped)-1], ad)
	assert.ErrorIs(t, err, crypto.ErrTampered, "truncated")
	_, err = crypto.UnwrapKey(kek, nil, ad)
	assert.ErrorIs(t, err, crypto.ErrTampered, "empty")
}

func TestUnwrapKeyWrongLength(t *testing.T) {
	// A validly sealed wrapped-key envelope whose plaintext is not 32 bytes,
	// built from the layout documented in doc.go.
	kek := newKey(t)
	ad := []byte("ad")
	wad := append(lp("noydb wrapped key"), ad...)
	for _, n := range []int{0, crypto.KeySize - 1, crypto.KeySize + 1} {
		env := crypto.SealWithNonce(kek, make([]byte, crypto.NonceSize), make([]byte, n), wad)
		_, err := crypto.Open(kek, env, wad)
		require.NoError(t, err, "the envelope itself is authentic")
		_, err = crypto.UnwrapKey(kek, env, ad)
		assert.ErrorIs(t, err, crypto.ErrTampered, "plaintext of %d bytes", n)
	}
}

// SealAt and OpenAt are Seal and Open with KeyAD, interchangeably.
func TestSealAtMatchesSealWithKeyAD(t *testing.T) {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	for _, pt := range [][]byte{{}, []byte("counter"), bytes.Repeat([]byte("x"), 1024)} {
		a, err := crypto.SealAt(k, pt, "books", "v/books/_ledger/head")
		require.NoError(t, err)
		got, err := crypto.Open(k, a, crypto.KeyAD("books", "v/books/_ledger/head"))
		require.NoError(t, err)
		assert.Equal(t, pt, got)

		b, err := crypto.Seal(k, pt, crypto.KeyAD("books", "v/books/_ledger/head"))
		require.NoError(t, err)
		got, err = crypto.OpenAt(k, b, "books", "v/books/_ledger/head")
		require.NoError(t, err)
		assert.Equal(t, pt, got)

		_, err = crypto.OpenAt(k, b, "books", "v/books/_ledger/other")
		assert.Equal(t, crypto.ErrTampered, err, "another key")
		_, err = crypto.OpenAt(k, b, "other", "v/books/_ledger/head")
		assert.Equal(t, crypto.ErrTampered, err, "another vault")
		b[len(b)-1] ^= 1
		_, err = crypto.OpenAt(k, b, "books", "v/books/_ledger/head")
		assert.Equal(t, crypto.ErrTampered, err, "a flipped bit")
	}
}

// A seal or open at a store key allocates what it returns, and nothing
// else: the AEAD is the key's, the nonce is read into the envelope and
// the associated data is built in a reused buffer.
func TestSealAtAllocatesItsResultOnly(t *testing.T) {
	if race.Enabled {
		t.Skip("under -race, sync.Pool drops buffers at random")
	}
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	plain := []byte("a counter or a ledger entry")
	sealed, err := crypto.SealAt(k, plain, "books", "_ledger/00000000000000000001")
	require.NoError(t, err)
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		_, _ = crypto.SealAt(k, plain, "books", "_ledger/00000000000000000001")
	}), "SealAt")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() {
		_, _ = crypto.OpenAt(k, sealed, "books", "_ledger/00000000000000000001")
	}), "OpenAt")
	ref := crypto.RecordRef{Vault: "books", Collection: "invoices", ID: "7", Revision: 1, Generation: 1}
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = crypto.SealRecord(k, plain, ref) }), "SealRecord")
}
