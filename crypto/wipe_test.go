package crypto_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
)

// After Wipe every use of a key (and of its copies) fails with ErrKeyWiped,
// and nothing is ever sealed or opened with zero bytes.
func TestWipedKeyFailsCleanly(t *testing.T) {
	k := newKey(t)
	kek := newKey(t)
	ref := crypto.RecordRef{Vault: "v", Collection: "c", ID: "x", Revision: 1}
	sealed, err := crypto.Seal(k, []byte("plain"), []byte("ad"))
	require.NoError(t, err)
	sealedAt, err := crypto.SealAt(k, []byte("plain"), "v", "key")
	require.NoError(t, err)
	record, err := crypto.SealRecord(k, []byte("plain"), ref)
	require.NoError(t, err)
	wrapped, err := crypto.WrapKey(kek, k, []byte("ad"))
	require.NoError(t, err)
	mac := k.MAC([]byte("m"))
	macer := crypto.NewMACer(k)
	require.Equal(t, mac, macer.MAC([]byte("m")))
	copyOfK := *k

	require.False(t, k.Wiped())
	k.Wipe()
	k.Wipe() // twice is harmless
	assert.True(t, k.Wiped())
	assert.True(t, copyOfK.Wiped(), "copies share the wipe")
	assert.Equal(t, make([]byte, crypto.KeySize), keyBytesOrZero(k), "the bytes are zero")

	_, err = crypto.Seal(k, []byte("plain"), []byte("ad"))
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	_, err = crypto.Open(k, sealed, []byte("ad"))
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	_, err = crypto.SealAt(&copyOfK, []byte("plain"), "v", "key")
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	_, err = crypto.OpenAt(k, sealedAt, "v", "key")
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	_, err = crypto.SealRecord(k, []byte("plain"), ref)
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	_, _, err = crypto.OpenRecord(k, record, ref)
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	_, err = crypto.WrapKey(kek, k, []byte("ad"))
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
	assert.Nil(t, k.MAC([]byte("m")))
	assert.True(t, k.Derive("label").Wiped(), "a wiped key's subkey is wiped")
	assert.Nil(t, crypto.NewMACer(k).MAC([]byte("m")), "a MACer of a wiped key has no MAC")

	// Separate keys are untouched: the MACer's copy and the unwrapped key.
	assert.Equal(t, mac, macer.MAC([]byte("m")))
	unwrapped, err := crypto.UnwrapKey(kek, wrapped, []byte("ad"))
	require.NoError(t, err)
	assert.False(t, unwrapped.Wiped())
	macer.Wipe()
	assert.Nil(t, macer.MAC([]byte("m")))
	kek.Wipe()
	_, err = crypto.UnwrapKey(kek, wrapped, []byte("ad"))
	assert.Error(t, err)

	var zero crypto.Key
	assert.True(t, zero.Wiped(), "the zero Key holds no key")
	_, err = crypto.Seal(&zero, []byte("plain"), nil)
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
}

func keyBytesOrZero(k *crypto.Key) (b []byte) {
	defer func() {
		if recover() != nil {
			b = make([]byte, crypto.KeySize)
		}
	}()
	return crypto.KeyBytes(k)
}

// Wipe while other goroutines seal and open: each use either works with the
// real key or fails with ErrKeyWiped; run with -race.
func TestWipeRacesUses(t *testing.T) {
	k := newKey(t)
	same := crypto.KeyFromBytes(crypto.KeyBytes(k)) // opens what k sealed
	sealed, err := crypto.SealAt(k, []byte("plain"), "v", "key")
	require.NoError(t, err)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for range 200 {
				out, err := crypto.SealAt(k, []byte("plain"), "v", "key")
				if err != nil {
					assert.ErrorIs(t, err, crypto.ErrKeyWiped)
					continue
				}
				// Sealed with the whole key, never with one half zeroed.
				pt, err := crypto.OpenAt(same, out, "v", "key")
				if assert.NoError(t, err) {
					assert.Equal(t, []byte("plain"), pt)
				}
				pt, err = crypto.OpenAt(k, sealed, "v", "key")
				if err != nil {
					assert.ErrorIs(t, err, crypto.ErrKeyWiped)
					continue
				}
				assert.Equal(t, []byte("plain"), pt)
			}
		})
	}
	close(start)
	k.Wipe()
	wg.Wait()
	_, err = crypto.OpenAt(k, sealed, "v", "key")
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
}

// TestKeyCachesItsAEAD: a key seals and opens with one AEAD made at its
// first use, whose copy of the key Wipe zeroes with the key's own bytes.
// Should a new golang.org/x/crypto hold the AEAD's key where the crypto
// package cannot find it, the AEAD is made per use again and this test
// fails, to be looked at.
func TestKeyCachesItsAEAD(t *testing.T) {
	k := newKey(t)
	want := crypto.KeyBytes(k)
	assert.Nil(t, crypto.HeldAEADKey(k), "no AEAD before the first use")
	sealed, err := crypto.Seal(k, []byte("plain"), []byte("ad"))
	require.NoError(t, err)
	held := crypto.HeldAEADKey(k)
	require.Equal(t, want, held, "the key holds its AEAD, and finds the AEAD's copy of the key")
	for range 3 {
		_, err := crypto.SealAt(k, []byte("plain"), "v", "key")
		require.NoError(t, err)
		pt, err := crypto.Open(k, sealed, []byte("ad"))
		require.NoError(t, err)
		assert.Equal(t, []byte("plain"), pt)
	}
	assert.Same(t, &held[0], &crypto.HeldAEADKey(k)[0], "one AEAD for every use")

	copyOfK := *k
	copyOfK.Wipe()
	assert.Equal(t, make([]byte, crypto.KeySize), held, "Wipe zeroed the AEAD's copy of the key")
	assert.Nil(t, crypto.HeldAEADKey(k))
	_, err = crypto.Open(k, sealed, []byte("ad"))
	assert.ErrorIs(t, err, crypto.ErrKeyWiped)
}

func TestMACerNeverPrintsKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab, 0x5a, 0x17, 0x42}, crypto.KeySize/4)
	m := crypto.NewMACer(crypto.KeyFromBytes(raw))
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%q"} {
		for _, arg := range []any{m, []*crypto.MACer{m}, struct{ M *crypto.MACer }{m}} {
			out := fmt.Sprintf(verb, arg)
			assert.NotContains(t, out, "ab5a", verb)
			assert.NotContains(t, out, "0xab", verb)
			assert.NotContains(t, out, "171", verb)
		}
		assert.Equal(t, "crypto.MACer(REDACTED)", fmt.Sprintf(verb, m))
	}
}
