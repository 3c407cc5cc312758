package crypto_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, p := range []crypto.KDFParams{crypto.DefaultKDF, cheapKDF, {Time: 16, MemoryKiB: 4 << 20, Threads: 255}} {
		h, err := crypto.NewHeader(p)
		require.NoError(t, err)
		assert.Equal(t, crypto.HeaderVersion, h.Version)
		assert.Equal(t, p, h.KDF)
		assert.NotEqual(t, [crypto.SaltSize]byte{}, h.Salt)

		b, err := h.MarshalBinary()
		require.NoError(t, err)
		assert.Len(t, b, crypto.HeaderSize)
		got, err := crypto.ParseHeader(b)
		require.NoError(t, err)
		assert.Equal(t, h, got)
	}
}

func TestNewHeaderFreshSalt(t *testing.T) {
	a, err := crypto.NewHeader(crypto.DefaultKDF)
	require.NoError(t, err)
	b, err := crypto.NewHeader(crypto.DefaultKDF)
	require.NoError(t, err)
	assert.NotEqual(t, a.Salt, b.Salt)
}

func TestNewHeaderRefusesBadParams(t *testing.T) {
	_, err := crypto.NewHeader(crypto.KDFParams{Time: 1, MemoryKiB: 64})
	assert.ErrorIs(t, err, crypto.ErrKDFTooWeak)
	_, err = crypto.NewHeader(crypto.KDFParams{Time: 17, MemoryKiB: 64, Threads: 1})
	assert.ErrorIs(t, err, crypto.ErrKDFTooCostly)
}

func TestMarshalHeaderRefusesInvalid(t *testing.T) {
	_, err := crypto.Header{}.MarshalBinary()
	assert.ErrorIs(t, err, crypto.ErrMalformed)

	h, err := crypto.NewHeader(cheapKDF)
	require.NoError(t, err)
	h.Version = 2
	_, err = h.MarshalBinary()
	assert.ErrorIs(t, err, crypto.ErrMalformed)
}

func TestParseHeaderRejects(t *testing.T) {
	h, err := crypto.NewHeader(crypto.DefaultKDF)
	require.NoError(t, err)
	good, err := h.MarshalBinary()
	require.NoError(t, err)

	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	// Offsets from the layout: magic 0..3, version 4, salt 5..20, time 21..24, memory 25..28, threads 29.
	cases := map[string][]byte{
		"nil":            nil,
		"empty":          {},
		"short":          good[:len(good)-1],
		"long":           append(bytes.Clone(good), 0),
		"magic":          mutate(func(b []byte) { b[0] ^= 1 }),
		"version 0":      mutate(func(b []byte) { b[4] = 0 }),
		"version 2":      mutate(func(b []byte) { b[4] = 2 }),
		"zero salt":      mutate(func(b []byte) { clear(b[5:21]) }),
		"time 0":         mutate(func(b []byte) { binary.BigEndian.PutUint32(b[21:25], 0) }),
		"time 17":        mutate(func(b []byte) { binary.BigEndian.PutUint32(b[21:25], 17) }),
		"memory > 4GiB":  mutate(func(b []byte) { binary.BigEndian.PutUint32(b[25:29], 4<<20+1) }),
		"memory < 8*thr": mutate(func(b []byte) { binary.BigEndian.PutUint32(b[25:29], 31) }),
		"zero threads":   mutate(func(b []byte) { b[29] = 0 }),
		"all zero":       make([]byte, crypto.HeaderSize),
		"all ones":       bytes.Repeat([]byte{0xff}, crypto.HeaderSize),
		"an envelope":    mutate(func(b []byte) { copy(b, []byte{1, 2, 3, 4}) }),
	}
	for name, b := range cases {
		_, err := crypto.ParseHeader(b)
		assert.ErrorIs(t, err, crypto.ErrMalformed, name)
	}

	// Weak but well-formed costs parse: policy is the caller's.
	weak := mutate(func(b []byte) {
		binary.BigEndian.PutUint32(b[21:25], 1)
		binary.BigEndian.PutUint32(b[25:29], 64)
		b[29] = 1
	})
	got, err := crypto.ParseHeader(weak)
	require.NoError(t, err)
	assert.ErrorIs(t, got.KDF.Check(false), crypto.ErrKDFTooWeak)
}
