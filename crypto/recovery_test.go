package crypto_test

import (
	"strings"
	"testing"

	"github.com/noydb-go/noydb/crypto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

func TestRecoveryCodeRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		code, err := crypto.NewRecoveryCode()
		require.NoError(t, err)
		require.Len(t, code, 28+6)
		assert.False(t, seen[code])
		seen[code] = true
		got, err := crypto.ParseRecoveryCode(code)
		require.NoError(t, err)
		assert.Equal(t, strings.ReplaceAll(code, "-", ""), string(got))
		// Lower case, spaces and no dashes read the same.
		got2, err := crypto.ParseRecoveryCode(strings.ToLower(strings.ReplaceAll(code, "-", " ")))
		require.NoError(t, err)
		assert.Equal(t, got, got2)
	}
	assert.GreaterOrEqual(t, crypto.RecoveryCodeBits, 128)
}

// Every single substitution and every swap of two adjacent different
// symbols of a code is caught by its checksum.
func TestRecoveryCodeCatchesEveryTypo(t *testing.T) {
	for range 20 {
		code, err := crypto.NewRecoveryCode()
		require.NoError(t, err)
		s := []byte(strings.ReplaceAll(code, "-", ""))
		for i := range s {
			for _, c := range []byte(crockford) {
				if c == s[i] {
					continue
				}
				typo := append([]byte(nil), s...)
				typo[i] = c
				_, err := crypto.ParseRecoveryCode(string(typo))
				require.ErrorIs(t, err, crypto.ErrBadRecoveryCode, "substitution at %d", i)
			}
			if i+1 < len(s) && s[i] != s[i+1] {
				typo := append([]byte(nil), s...)
				typo[i], typo[i+1] = typo[i+1], typo[i]
				_, err := crypto.ParseRecoveryCode(string(typo))
				require.ErrorIs(t, err, crypto.ErrBadRecoveryCode, "swap at %d", i)
			}
		}
	}
}

func TestRecoveryCodeBadInput(t *testing.T) {
	code, err := crypto.NewRecoveryCode()
	require.NoError(t, err)
	for name, text := range map[string]string{
		"empty":      "",
		"short":      code[:len(code)-1],
		"long":       code + "0",
		"alphabet":   "U" + code[1:],
		"punctuated": code[:5] + "!" + code[6:],
		"unicode":    code[:4] + "é" + code[4:],
	} {
		_, err := crypto.ParseRecoveryCode(text)
		assert.ErrorIs(t, err, crypto.ErrBadRecoveryCode, name)
	}
}

func TestRecoveryCodeConfusables(t *testing.T) {
	// O reads as 0, I and L as 1: a code holding 0 or 1 typed with a letter still parses.
	for range 100 {
		code, err := crypto.NewRecoveryCode()
		require.NoError(t, err)
		if !strings.ContainsAny(code, "01") {
			continue
		}
		typed := strings.NewReplacer("0", "O", "1", "l").Replace(code)
		a, err := crypto.ParseRecoveryCode(code)
		require.NoError(t, err)
		b, err := crypto.ParseRecoveryCode(typed)
		require.NoError(t, err)
		assert.Equal(t, a, b)
		return
	}
	t.Fatal("no code with a 0 or 1 in 100")
}
