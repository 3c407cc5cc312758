package crypto_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/race"
)

func TestGenerateKeyDistinct(t *testing.T) {
	a, b := newKey(t), newKey(t)
	assert.False(t, sameKey(a, b))
	assert.True(t, sameKey(a, a))
}

func TestKeyNeverPrintsBytes(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab, 0x5a, 0x17, 0x42}, crypto.KeySize/4)
	k := crypto.KeyFromBytes(raw)
	type holder struct {
		K  crypto.Key
		KP *crypto.Key
	}
	forbidden := []string{"10101011",
		hex.EncodeToString(raw), strings.ToUpper(hex.EncodeToString(raw)),
		string(raw), "171", "ab5a", "AB5A", "0xab", "0xAB",
	}
	for _, verb := range []string{"%v", "%+v", "%s", "%#v", "%x", "%X", "% x", "%q", "%d", "%08b"} {
		for _, arg := range []any{k, *k, holder{K: *k, KP: k}, []*crypto.Key{k}, []crypto.Key{*k}} {
			out := fmt.Sprintf(verb, arg)
			for _, f := range forbidden {
				assert.NotContains(t, out, f, "verb %s on %T", verb, arg)
			}
		}
		assert.Contains(t, fmt.Sprintf(verb, k), "crypto.Key(REDACTED)", verb)
	}
	assert.Equal(t, "crypto.Key(REDACTED)", k.String())
	assert.Equal(t, "crypto.Key(REDACTED)", k.GoString())
	assert.Equal(t, "crypto.Key(REDACTED)", fmt.Sprint(k))
}

func TestDerive(t *testing.T) {
	k := newKey(t)
	a := k.Derive("noydb ledger v1")
	assert.True(t, sameKey(a, k.Derive("noydb ledger v1")), "deterministic")
	assert.False(t, sameKey(a, k.Derive("noydb ledger v2")), "labels separate")
	assert.False(t, sameKey(a, k), "subkey differs from parent")
	assert.False(t, sameKey(a, newKey(t).Derive("noydb ledger v1")), "parents separate")
	assert.False(t, sameKey(k.Derive(""), k))
}

func TestMAC(t *testing.T) {
	k := newKey(t)
	m := k.MAC([]byte("ab"), []byte("c"))
	assert.Len(t, m, 32)
	assert.True(t, crypto.EqualMAC(m, k.MAC([]byte("ab"), []byte("c"))))

	for name, parts := range map[string][][]byte{
		"a|bc":      {[]byte("a"), []byte("bc")},
		"abc":       {[]byte("abc")},
		"ab|c|":     {[]byte("ab"), []byte("c"), nil},
		"|ab|c":     {nil, []byte("ab"), []byte("c")},
		"no parts":  nil,
		"one empty": {nil},
	} {
		assert.False(t, crypto.EqualMAC(m, k.MAC(parts...)), name)
	}
	assert.False(t, crypto.EqualMAC(k.MAC(), k.MAC(nil)))
	assert.False(t, crypto.EqualMAC(m, newKey(t).MAC([]byte("ab"), []byte("c"))), "other key")
}

func TestEqualMAC(t *testing.T) {
	assert.True(t, crypto.EqualMAC([]byte{1, 2}, []byte{1, 2}))
	assert.False(t, crypto.EqualMAC([]byte{1, 2}, []byte{1, 3}))
	assert.False(t, crypto.EqualMAC([]byte{1, 2}, []byte{1, 2, 3}))
	assert.True(t, crypto.EqualMAC(nil, []byte{}))
}

func TestKeyFromVectorBytesMatchesMAC(t *testing.T) {
	// MAC and Derive agree with the bytes a key was made from: a guard on
	// the test helpers the vectors rely on.
	raw := bytes.Repeat([]byte{7}, crypto.KeySize)
	k := crypto.KeyFromBytes(raw)
	require.Equal(t, raw, crypto.KeyBytes(k))
	assert.True(t, sameKey(k, keyFrom(raw)))
}

func TestMACerMatchesKeyMAC(t *testing.T) {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	m := crypto.NewMACer(k)
	for _, parts := range [][][]byte{nil, {[]byte("a")}, {[]byte("ab"), []byte("c")}, {[]byte("a"), []byte("bc")}} {
		for range 3 { // reused state must give the same answer
			assert.Equal(t, k.MAC(parts...), m.MAC(parts...))
		}
	}
	other, err := crypto.GenerateKey()
	require.NoError(t, err)
	assert.NotEqual(t, other.MAC([]byte("a")), m.MAC([]byte("a")))
}

// AppendMAC appends what MAC returns after what dst holds, without a copy
// when dst has room, and appends nothing once the MACer is wiped.
func TestMACerAppendMAC(t *testing.T) {
	k, err := crypto.GenerateKey()
	require.NoError(t, err)
	m := crypto.NewMACer(k)
	parts := [][]byte{[]byte("ab"), []byte("c")}
	buf := make([]byte, 3, 64)
	copy(buf, "xyz")
	out := m.AppendMAC(buf, parts...)
	assert.Equal(t, append([]byte("xyz"), k.MAC(parts...)...), out)
	assert.Same(t, &buf[0], &out[0], "appended in place")
	if !race.Enabled { // under -race, sync.Pool drops states at random
		assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { m.AppendMAC(buf[:3], parts...) }))
	}
	m.Wipe()
	assert.Equal(t, []byte("xyz"), m.AppendMAC(buf[:3], parts...))
}
