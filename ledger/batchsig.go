package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"

	"filippo.io/edwards25519"
)

// Batch verification of Ed25519 signatures.
//
// A ledger written one entry per commit carries one signature per entry,
// and ed25519.Verify costs a double scalar multiplication for each. The
// signature workers check a batch of signatures at once instead, with the
// randomized batch equation
//
//	[8] ( Σ z_i R_i + Σ_A (Σ_{i signed by A} z_i k_i) A - (Σ z_i s_i) B ) = 0
//
// where k_i = SHA-512(R_i || A_i || M_i) mod L and the z_i are random
// 128-bit scalars drawn from crypto/rand for each batch: one multi-scalar
// multiplication whose doublings all terms share, and whose public key
// terms are grouped by key (a ledger has few authors: most batches have one
// key, whose term costs what one signature's does). The standard library
// exposes no batch or multi-scalar API, hence filippo.io/edwards25519, the
// group arithmetic crypto/ed25519 is itself built from.
//
// A batch that fails proves nothing about which signature is bad: the
// caller then checks each one with ed25519.Verify, so a rejection, and
// which entry is reported, are exactly those of ed25519.Verify. A batch
// that holds is final, so it must not accept what ed25519.Verify rejects.
// Signatures the batch does not take (it reports false, and the caller
// checks them one at a time):
//
//   - s >= L (ed25519.Verify rejects it), an R or A whose encoding is not
//     canonical (y >= p, or the sign bit set on x = 0: ed25519.Verify
//     rejects such an R; it accepts such an A, which the batch leaves to it);
//   - a public key with a small-order component ([L]A != 0), checked once
//     per key (a worker keeps the keys it has decompressed).
//
// What remains is the cofactor. ed25519.Verify is cofactorless: it accepts
// when R = [s]B - [k]A exactly. The batch equation is cofactored (RFC 8032
// section 5.1.7 allows either): with A in the prime-order subgroup, a
// signature that holds in it and fails ed25519.Verify has an R with a
// small-order component T != 0 and s right for R - T. Signing never makes
// such an R (R = [r]B); and since k hashes R, adding T to the R of someone
// else's signature changes k, and the signature then fails both checks:
// only the key's holder can make one, on purpose (R = [r]B + T, then
// s = r + k a). A batch of such signatures, and otherwise good ones, holds:
// the entry is accepted where ed25519.Verify would reject it, an entry its
// author did sign. Checking [L]R for every R would close that gap exactly,
// but it costs a scalar multiplication per signature, most of what
// ed25519.Verify costs (measured: ~30 µs, against ~10 µs per signature for
// the whole batch and ~50 µs for ed25519.Verify on this project's 2-core
// machines). The cofactorless batch equation (without [8]) would not be
// exact either: small-order parts of several signatures cancel with
// probability up to 1/2 over the z_i, an outcome that could change from
// one Verify to the next. The cofactored one is deterministic: an entry's
// outcome is that of its batch, the same on every run (batches are cut at
// fixed positions). The tests (batchsig_test.go) assert exactly this: the
// batch agrees with ed25519.Verify on random mixes of good, corrupted,
// swapped, non-canonical and small-order-key signatures, and on an R with a
// small-order component, with the cofactored check.

// minBatch: fewer signatures are checked with ed25519.Verify: the shared
// doublings of the batch cost more than they save.
const minBatch = 4

// batchKey is a public key as the batch uses it: decompressed once.
type batchKey struct {
	point *edwards25519.Point
	ok    bool // canonical and in the prime-order subgroup: batchable
}

// batchKeys caches the keys a signature worker has seen. A worker owns its
// cache: it is not safe for concurrent use.
type batchKeys map[[32]byte]*batchKey

func (c batchKeys) get(pub []byte) *batchKey {
	var k [32]byte
	copy(k[:], pub)
	if bk := c[k]; bk != nil {
		return bk
	}
	bk := &batchKey{}
	if canonicalPoint(pub) {
		if p, err := new(edwards25519.Point).SetBytes(pub); err == nil && primeOrder(p) {
			bk.point, bk.ok = p, true
		}
	}
	if len(c) > 1024 {
		clear(c) // a bound, should a ledger have that many authors
	}
	c[k] = bk
	return bk
}

// scalarMinusOne is L-1, as a scalar.
var scalarMinusOne = new(edwards25519.Scalar).Negate(edwards25519.NewScalar().Add(edwards25519.NewScalar(), scalarOne()))

func scalarOne() *edwards25519.Scalar {
	var b [32]byte
	b[0] = 1
	s, _ := edwards25519.NewScalar().SetCanonicalBytes(b[:])
	return s
}

var scalarZero = edwards25519.NewScalar()

// primeOrder reports whether [L]p is the identity: p has no small-order
// component. ([L-1]p = -p, since a scalar is below L.)
func primeOrder(p *edwards25519.Point) bool {
	q := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(scalarMinusOne, p, scalarZero)
	return q.Add(q, p).Equal(edwards25519.NewIdentityPoint()) == 1
}

// canonicalPoint reports whether b is the canonical encoding of a field
// element y < p = 2^255-19 with a sign bit that is not that of a zero x
// (x = 0 only for y = 1 and y = p-1). It does not check the point is on
// the curve.
func canonicalPoint(b []byte) bool {
	if len(b) != 32 {
		return false
	}
	top := b[31] & 0x7f
	allFF := true // b[1:31] all 0xff
	allZero := true
	for _, c := range b[1:31] {
		allFF = allFF && c == 0xff
		allZero = allZero && c == 0
	}
	if top == 0x7f && allFF && b[0] >= 0xed {
		return false // y >= p
	}
	if b[31]&0x80 != 0 {
		if top == 0 && allZero && b[0] == 1 {
			return false // y = 1, "-0"
		}
		if top == 0x7f && allFF && b[0] == 0xec {
			return false // y = p-1, "-0"
		}
	}
	return true
}

// batchVerify reports whether every signature of jobs holds, as
// ed25519.Verify would find each one. False says only that the batch did
// not establish it: a signature failed, or was left to ed25519.Verify (see
// above); the caller checks them one at a time then.
func batchVerify(jobs []sigJob, keys batchKeys) bool {
	n := len(jobs)
	if n < minBatch {
		for _, j := range jobs {
			if !ed25519.Verify(j.pub, j.msg, j.sig) {
				return false
			}
		}
		return true
	}
	// Terms: B, the distinct keys, the R_i.
	points := make([]*edwards25519.Point, 1, 2+2*n)
	scalars := make([]*edwards25519.Scalar, 1, 2+2*n)
	points[0] = edwards25519.NewGeneratorPoint()
	sumS := edwards25519.NewScalar()
	scalars[0] = sumS
	keyAt := make(map[*batchKey]*edwards25519.Scalar, 2)

	zs := make([]byte, 16*n)
	if _, err := rand.Read(zs); err != nil {
		return false
	}
	var zb [32]byte
	var h [sha512.Size]byte
	rs := make([]edwards25519.Point, n)
	sc := make([]edwards25519.Scalar, 4*n) // z, s, k, z*k
	for i, j := range jobs {
		if len(j.pub) != 32 || len(j.sig) != 64 {
			return false
		}
		bk := keys.get(j.pub)
		if !bk.ok {
			return false
		}
		z, s, k, zk := &sc[4*i], &sc[4*i+1], &sc[4*i+2], &sc[4*i+3]
		if _, err := s.SetCanonicalBytes(j.sig[32:]); err != nil {
			return false
		}
		rb := j.sig[:32]
		if !canonicalPoint(rb) {
			return false
		}
		r := &rs[i]
		if _, err := r.SetBytes(rb); err != nil {
			return false
		}
		d := sha512.New()
		d.Write(rb)
		d.Write(j.pub)
		d.Write(j.msg)
		d.Sum(h[:0])
		if _, err := k.SetUniformBytes(h[:]); err != nil {
			return false
		}
		copy(zb[:16], zs[16*i:])
		if _, err := z.SetCanonicalBytes(zb[:]); err != nil {
			return false
		}
		// -Σ z_i s_i on B, Σ z_i k_i on A_i, z_i on R_i.
		sumS.MultiplyAdd(z, s, sumS)
		zk.Multiply(z, k)
		if acc := keyAt[bk]; acc != nil {
			acc.Add(acc, zk)
		} else {
			acc = edwards25519.NewScalar().Set(zk)
			keyAt[bk] = acc
			points = append(points, bk.point)
			scalars = append(scalars, acc)
		}
		points = append(points, r)
		scalars = append(scalars, z)
	}
	sumS.Negate(sumS)
	q := new(edwards25519.Point).VarTimeMultiScalarMult(scalars, points)
	return q.MultByCofactor(q).Equal(edwards25519.NewIdentityPoint()) == 1
}
