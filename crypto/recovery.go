package crypto

import (
	"crypto/rand"
	"errors"
	"strings"
)

// ErrBadRecoveryCode reports text that is not a recovery code: a wrong
// length, a character outside the alphabet, or a checksum that does not
// match (a typo). It is found by ParseRecoveryCode alone, before any key
// derivation or store access.
var ErrBadRecoveryCode = errors.New("not a valid recovery code (check it for typos)")

// A recovery code is 28 symbols of Crockford's base32 alphabet, written in
// seven groups of four joined by '-':
//
//	K7QF-3M9X-...-R2TW
//
// The first 26 symbols are random (130 bits). The last two are check
// symbols of a Reed-Solomon code over GF(32): every valid code c satisfies
// sum c[i]·α^i = 0 and sum c[i]·α^(2i) = 0, so any one or two wrong
// symbols (a substitution, two adjacent symbols swapped) are always caught,
// and random text passes with a chance of 1 in 1024.
const (
	// RecoveryCodeBits is the entropy of a recovery code.
	RecoveryCodeBits = recoveryData * 5
	recoveryData     = 26
	recoverySymbols  = recoveryData + 2
	recoveryGroup    = 4
)

// recoveryAlphabet is Crockford's base32: no I, L, O or U.
const recoveryAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// GF(32) with the primitive polynomial x^5 + x^2 + 1; α = 2.
var gfExp, gfLog = func() (exp [62]byte, log [32]byte) {
	x := byte(1)
	for i := range 31 {
		exp[i], exp[i+31] = x, x
		log[x] = byte(i)
		x <<= 1
		if x&32 != 0 {
			x ^= 0b100101
		}
	}
	return exp, log
}()

func gfMul(a, b byte) byte {
	if a == 0 || b == 0 {
		return 0
	}
	return gfExp[int(gfLog[a])+int(gfLog[b])]
}

func gfDiv(a, b byte) byte {
	if a == 0 {
		return 0
	}
	return gfExp[(int(gfLog[a])+31-int(gfLog[b]))%31]
}

// alphaPow returns α^e.
func alphaPow(e int) byte { return gfExp[e%31] }

// syndromes returns sum s[i]·α^i and sum s[i]·α^(2i).
func syndromes(s []byte) (byte, byte) {
	var s1, s2 byte
	for i, c := range s {
		s1 ^= gfMul(c, alphaPow(i))
		s2 ^= gfMul(c, alphaPow(2*i))
	}
	return s1, s2
}

// NewRecoveryCode returns a new random recovery code in its written form.
func NewRecoveryCode() (string, error) {
	s := make([]byte, recoverySymbols)
	if _, err := rand.Read(s[:recoveryData]); err != nil {
		return "", err
	}
	for i := range recoveryData {
		s[i] &= 31
	}
	// Solve for the check symbols x (at p) and y (at q) so that both
	// syndromes vanish: x·α^p + y·α^q = A, x·α^2p + y·α^2q = B.
	a, b := syndromes(s[:recoveryData])
	p, q := recoveryData, recoveryData+1
	ap, aq, a2p, a2q := alphaPow(p), alphaPow(q), alphaPow(2*p), alphaPow(2*q)
	det := gfMul(ap, a2q) ^ gfMul(aq, a2p)
	s[p] = gfDiv(gfMul(a, a2q)^gfMul(aq, b), det)
	s[q] = gfDiv(gfMul(ap, b)^gfMul(a, a2p), det)
	out := formatRecovery(s)
	clear(s)
	return out, nil
}

func formatRecovery(s []byte) string {
	var b strings.Builder
	for i, c := range s {
		if i > 0 && i%recoveryGroup == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(recoveryAlphabet[c])
	}
	return b.String()
}

// ParseRecoveryCode checks text typed by a person and returns the code's
// canonical form (the key-derivation input): upper case, without
// separators. Case does not matter, '-' and spaces are ignored, and O, I
// and L are read as 0, 1 and 1. Anything else that is not a valid code is
// an error matching ErrBadRecoveryCode; no key is derived to find that.
func ParseRecoveryCode(text string) ([]byte, error) {
	s := make([]byte, 0, recoverySymbols)
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '-' || c == ' ':
			continue
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		switch c {
		case 'O':
			c = '0'
		case 'I', 'L':
			c = '1'
		}
		j := strings.IndexByte(recoveryAlphabet, c)
		if j < 0 {
			clear(s)
			return nil, badCode("a character outside the code's alphabet")
		}
		if len(s) == recoverySymbols {
			clear(s)
			return nil, badCode("too long")
		}
		s = append(s, byte(j))
	}
	if len(s) != recoverySymbols {
		clear(s)
		return nil, badCode("too short")
	}
	if s1, s2 := syndromes(s); s1 != 0 || s2 != 0 {
		clear(s)
		return nil, badCode("checksum mismatch")
	}
	out := make([]byte, recoverySymbols)
	for i, c := range s {
		out[i] = recoveryAlphabet[c]
	}
	clear(s)
	return out, nil
}

// recoveryCodeError is ErrBadRecoveryCode with the reason.
type recoveryCodeError struct{ why string }

func (e *recoveryCodeError) Error() string { return ErrBadRecoveryCode.Error() + ": " + e.why }
func (e *recoveryCodeError) Unwrap() error { return ErrBadRecoveryCode }

func badCode(why string) error { return &recoveryCodeError{why: why} }
