package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"filippo.io/edwards25519"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	require.NoError(t, err)
	return b
}

// failing returns the indexes of jobs checkSigs reports, and of those
// ed25519.Verify rejects.
func failing(jobs []sigJob, keys batchKeys) (got, want []int) {
	for i := range jobs {
		jobs[i].seq = uint64(i)
		if !ed25519.Verify(jobs[i].pub, jobs[i].msg, jobs[i].sig) {
			want = append(want, i)
		}
	}
	checkSigs(jobs, keys, func(e *SignatureError) { got = append(got, int(e.Seq)) })
	slices.Sort(got)
	return got, want
}

// TestBatchVerifyRFC8032: the test vectors of RFC 8032 (section 7.1, tests
// 1 to 3) hold in a batch, which fails, and reports exactly the entry, when
// one bit of any signature, key or message is flipped.
func TestBatchVerifyRFC8032(t *testing.T) {
	vectors := []struct{ seed, pub, msg, sig string }{
		{"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
			"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
			"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
		{"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
			"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
			"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
	}
	var jobs []sigJob
	for _, v := range vectors {
		priv := ed25519.NewKeyFromSeed(unhex(t, v.seed))
		pub, msg, sig := unhex(t, v.pub), unhex(t, v.msg), unhex(t, v.sig)
		require.Equal(t, pub, []byte(priv.Public().(ed25519.PublicKey)))
		require.Equal(t, sig, ed25519.Sign(priv, msg))
		jobs = append(jobs, sigJob{pub: pub, msg: msg, sig: sig})
	}
	// Twice each: a batch of six (above minBatch), three keys.
	jobs = append(jobs, jobs...)
	require.GreaterOrEqual(t, len(jobs), minBatch)
	keys := batchKeys{}
	assert.True(t, batchVerify(jobs, keys))
	got, want := failing(jobs, keys)
	assert.Empty(t, got)
	assert.Empty(t, want)

	flip := func(b []byte, bit int) []byte {
		b = slices.Clone(b)
		b[bit/8] ^= 1 << (bit % 8)
		return b
	}
	for i := range jobs {
		for _, part := range []string{"R", "s", "pub", "msg"} {
			bad := slices.Clone(jobs)
			switch part {
			case "R":
				bad[i].sig = flip(bad[i].sig, 3)
			case "s":
				bad[i].sig = flip(bad[i].sig, 256+9)
			case "pub":
				bad[i].pub = flip(bad[i].pub, 17)
			case "msg":
				bad[i].msg = append(slices.Clone(bad[i].msg), 0)
			}
			assert.False(t, batchVerify(bad, keys), "%s of %d", part, i)
			got, want := failing(bad, keys)
			assert.Equal(t, []int{i}, want, "%s of %d", part, i)
			assert.Equal(t, want, got, "%s of %d", part, i)
		}
	}
}

// torsion returns the points of order 1 to 8 (T_j = [j]T_8).
func torsion(t testing.TB) []*edwards25519.Point {
	t.Helper()
	t8, err := new(edwards25519.Point).SetBytes(unhex(t, "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"))
	require.NoError(t, err)
	id := edwards25519.NewIdentityPoint()
	four := new(edwards25519.Point).Add(t8, t8)
	four.Add(four, four)
	require.Equal(t, 1, new(edwards25519.Point).MultByCofactor(t8).Equal(id))
	require.Equal(t, 0, four.Equal(id)) // of order 8 exactly
	pts := []*edwards25519.Point{edwards25519.NewIdentityPoint()}
	for j := 1; j < 8; j++ {
		pts = append(pts, new(edwards25519.Point).Add(pts[j-1], t8))
	}
	return pts
}

// craft signs msg with the secret scalar a for the public key encoded as
// pub, with the nonce point [r]B + U. It returns the signature and k.
func craft(pub, msg []byte, a, r *edwards25519.Scalar, u *edwards25519.Point) ([]byte, *edwards25519.Scalar) {
	R := new(edwards25519.Point).ScalarBaseMult(r)
	R.Add(R, u)
	rb := R.Bytes()
	h := sha512.New()
	h.Write(rb)
	h.Write(pub)
	h.Write(msg)
	k, _ := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	s := edwards25519.NewScalar().MultiplyAdd(k, a, r)
	return append(rb, s.Bytes()...), k
}

func randScalar(t testing.TB, rng *rand.Rand) *edwards25519.Scalar {
	var b [64]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	s, err := edwards25519.NewScalar().SetUniformBytes(b[:])
	require.NoError(t, err)
	return s
}

// cofactored is the cofactored single check: [8]([s]B - [k]A - R) = 0.
func cofactored(t testing.TB, j sigJob) bool {
	A, err := new(edwards25519.Point).SetBytes(j.pub)
	require.NoError(t, err)
	R, err := new(edwards25519.Point).SetBytes(j.sig[:32])
	require.NoError(t, err)
	s, err := edwards25519.NewScalar().SetCanonicalBytes(j.sig[32:])
	require.NoError(t, err)
	h := sha512.New()
	h.Write(j.sig[:32])
	h.Write(j.pub)
	h.Write(j.msg)
	k, _ := edwards25519.NewScalar().SetUniformBytes(h.Sum(nil))
	P := new(edwards25519.Point).VarTimeDoubleScalarBaseMult(edwards25519.NewScalar().Negate(k), A, s)
	P.Subtract(P, R)
	return P.MultByCofactor(P).Equal(edwards25519.NewIdentityPoint()) == 1
}

// specials are the edge cases: signatures ed25519.Verify accepts or
// rejects that only crafted keys or signatures make.
type special struct {
	name  string
	job   sigJob
	valid bool // what ed25519.Verify says (checked)
}

func specials(t testing.TB, rng *rand.Rand) []special {
	t.Helper()
	tors := torsion(t)
	var out []special
	add := func(name string, pub, msg, sig []byte) {
		j := sigJob{pub: pub, msg: msg, sig: sig}
		out = append(out, special{name, j, ed25519.Verify(pub, msg, sig)})
	}
	zero := edwards25519.NewScalar()
	msg := func(i int) []byte { return fmt.Appendf(nil, "crafted message %d", i) }

	// The identity as the key: R = [s]B signs any message (ed25519.Verify
	// accepts it: it does not reject small-order keys).
	idPub := edwards25519.NewIdentityPoint().Bytes()
	sig, _ := craft(idPub, msg(0), zero, randScalar(t, rng), tors[0])
	add("identity key", idPub, msg(0), sig)
	// Its non-canonical encodings: y = p+1, and the sign bit on x = 0.
	idPlusP := unhex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
	idNeg := unhex(t, "0100000000000000000000000000000000000000000000000000000000000080")
	for i, pub := range [][]byte{idPlusP, idNeg} {
		sig, _ := craft(pub, msg(1), zero, randScalar(t, rng), tors[0])
		add(fmt.Sprintf("non-canonical identity key %d", i), pub, msg(1), sig)
	}
	// R the identity (s = 0) under the identity key, canonical and not.
	for i, rb := range [][]byte{idPub, idPlusP, idNeg} {
		add(fmt.Sprintf("identity R %d", i), idPub, msg(2), append(slices.Clone(rb), zero.Bytes()...))
	}

	// Keys with a small-order component: A = T_j, and A = [a]B + T_j. The
	// signature is good for ed25519.Verify when [k]T_j = U, the torsion
	// added to R; made by trying messages.
	for j := 1; j < 8; j++ {
		for _, mixed := range []bool{false, true} {
			a := zero
			A := new(edwards25519.Point).Set(tors[j])
			if mixed {
				a = randScalar(t, rng)
				A.ScalarBaseMult(a)
				A.Add(A, tors[j])
			}
			pub := A.Bytes()
			var good, bad bool
			for i := 0; !(good && bad); i++ {
				require.Less(t, i, 1000)
				m := msg(100*j + i)
				u := rng.IntN(8)
				sig, _ := craft(pub, m, a, randScalar(t, rng), tors[u])
				// With U = 0, [s]B - [k]A = R - [k]T_j: cofactored-good.
				ok := ed25519.Verify(pub, m, sig)
				if ok && !good {
					good = true
					add(fmt.Sprintf("small-order key T%d mixed=%v, good", j, mixed), pub, m, sig)
				}
				if !ok && !bad && u == 0 {
					bad = true
					add(fmt.Sprintf("small-order key T%d mixed=%v, bad", j, mixed), pub, m, sig)
				}
			}
		}
	}

	// s + L: the same s mod L, not canonical.
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	m := msg(3)
	sig = ed25519.Sign(priv, m)
	s, err := edwards25519.NewScalar().SetCanonicalBytes(sig[32:])
	require.NoError(t, err)
	if sb := addL(s.Bytes()); sb != nil {
		add("s+L", priv.Public().(ed25519.PublicKey), m, append(slices.Clone(sig[:32]), sb...))
	}
	return out
}

// addL returns s + L as 32 bytes, or nil when it does not fit in 253 bits
// (the encoding of s has 3 spare bits).
func addL(s []byte) []byte {
	l := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	out := make([]byte, 32)
	carry := 0
	for i := range out {
		v := int(s[i]) + int(l[i]) + carry
		out[i], carry = byte(v), v>>8
	}
	if carry != 0 || out[31]&0xe0 != 0 {
		return nil
	}
	return out
}

// TestBatchVerifySpecials: each crafted edge case, in a batch of good
// signatures, gets the outcome ed25519.Verify gives it.
func TestBatchVerifySpecials(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sp := specials(t, rng)
	names := map[string]bool{}
	for _, s := range sp {
		names[s.name] = s.valid
	}
	// The cases are the ones meant: good and bad ones of each kind.
	assert.True(t, names["identity key"])
	assert.False(t, names["identity R 1"])
	assert.False(t, names["identity R 2"])
	assert.True(t, names["non-canonical identity key 0"])
	assert.True(t, names["small-order key T2 mixed=true, good"])
	assert.False(t, names["small-order key T2 mixed=true, bad"])
	assert.Contains(t, names, "s+L")
	assert.False(t, names["s+L"])
	honest := benchJobs(7, 2)
	for _, s := range sp {
		for _, at := range []int{0, 3, 7} {
			jobs := slices.Insert(slices.Clone(honest), at, s.job)
			keys := batchKeys{}
			if batchVerify(jobs, keys) {
				// The batch takes only what ed25519.Verify accepts.
				assert.True(t, s.valid, s.name)
			}
			got, want := failing(jobs, keys)
			assert.Equal(t, want, got, s.name)
			if s.valid {
				assert.Empty(t, want, s.name)
			} else {
				assert.Equal(t, []int{at}, want, s.name)
			}
		}
	}
}

// TestBatchVerifySmallOrderR is the documented difference (batchsig.go):
// a signature made by the key's holder with a small-order point added to
// its nonce point R fails ed25519.Verify (cofactorless) and holds in a
// batch (cofactored). Added to the R of a signature made by someone else,
// the point changes k: the signature fails both. In a batch that fails for
// another signature, ed25519.Verify decides, and rejects it.
func TestBatchVerifySmallOrderR(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	tors := torsion(t)
	honest := benchJobs(7, 2)
	seed := make([]byte, 32) // benchJobs's first key
	h := sha512.Sum512(seed)
	a, err := edwards25519.NewScalar().SetBytesWithClamping(h[:32])
	require.NoError(t, err)
	pub := honest[0].pub
	require.Equal(t, pub, new(edwards25519.Point).ScalarBaseMult(a).Bytes())
	for j := 1; j < 8; j++ {
		m := sigJob{pub: pub, msg: fmt.Appendf(nil, "crafted by the signer %d", j)}
		m.sig, _ = craft(pub, m.msg, a, randScalar(t, rng), tors[j])
		require.False(t, ed25519.Verify(m.pub, m.msg, m.sig))
		require.True(t, cofactored(t, m))
		jobs := append(slices.Clone(honest), m)
		assert.True(t, batchVerify(jobs, batchKeys{}), "T%d", j)
		bad := slices.Clone(jobs)
		bad[2].msg = []byte("another message")
		got, want := failing(bad, batchKeys{})
		assert.Equal(t, []int{2, 7}, want)
		assert.Equal(t, want, got)

		// Malleated by someone without the key: k changes, both reject.
		R, err := new(edwards25519.Point).SetBytes(honest[1].sig[:32])
		require.NoError(t, err)
		mal := honest[1]
		mal.sig = append(R.Add(R, tors[j]).Bytes(), honest[1].sig[32:]...)
		require.False(t, cofactored(t, mal))
		jobs = append(slices.Clone(honest), mal)
		assert.False(t, batchVerify(jobs, batchKeys{}), "T%d", j)
		got, want = failing(jobs, batchKeys{})
		assert.Equal(t, []int{7}, want)
		assert.Equal(t, want, got)
	}
}

// TestBatchVerifyAgrees: random batches of good signatures with some
// corrupted (a bit of R, s, the key or the message flipped, signatures
// swapped between entries) and crafted edge cases among them: checkSigs
// reports exactly the entries ed25519.Verify rejects, and the batch holds
// exactly when there are none.
func TestBatchVerifyAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pool := benchJobs(96, 3)
	sp := specials(t, rng)
	keys := batchKeys{}
	rounds := 400
	if testing.Short() {
		rounds = 100
	}
	for round := range rounds {
		n := 1 + rng.IntN(40)
		jobs := make([]sigJob, n)
		for i := range jobs {
			jobs[i] = pool[rng.IntN(len(pool))]
			jobs[i].msg = slices.Clone(jobs[i].msg)
			jobs[i].sig = slices.Clone(jobs[i].sig)
			jobs[i].pub = slices.Clone(jobs[i].pub)
		}
		corrupt := 0
		if round%3 != 0 {
			corrupt = 1 + rng.IntN(3)
		}
		what := make([]string, 0, corrupt)
		crafted := false
		for range corrupt {
			i := rng.IntN(n)
			switch c := rng.IntN(7); c {
			case 0:
				jobs[i].sig[rng.IntN(32)] ^= 1 << rng.IntN(8)
				what = append(what, "R")
			case 1:
				jobs[i].sig[32+rng.IntN(32)] ^= 1 << rng.IntN(8)
				what = append(what, "s")
			case 2:
				jobs[i].pub[rng.IntN(32)] ^= 1 << rng.IntN(8)
				what = append(what, "pub")
			case 3:
				jobs[i].msg[rng.IntN(len(jobs[i].msg))] ^= 1 << rng.IntN(8)
				what = append(what, "msg")
			case 4:
				k := rng.IntN(n)
				jobs[i].sig, jobs[k].sig = jobs[k].sig, jobs[i].sig
				what = append(what, "swap")
			default:
				s := sp[rng.IntN(len(sp))]
				jobs[i] = sigJob{pub: slices.Clone(s.job.pub), msg: slices.Clone(s.job.msg), sig: slices.Clone(s.job.sig)}
				what = append(what, s.name)
				crafted = true
			}
		}
		got, want := failing(jobs, keys)
		require.Equal(t, want, got, "round %d: %v", round, what)
		switch ok := batchVerify(jobs, keys); {
		case ok:
			assert.Empty(t, want, "round %d: %v", round, what)
		case !crafted:
			// Honest keys and signatures, corrupted or not: the batch
			// fails only on a signature ed25519.Verify rejects.
			assert.NotEmpty(t, want, "round %d: %v", round, what)
		}
	}
}

// TestCanonicalPoint: canonicalPoint says what decoding and encoding again
// says, on the edge encodings and random ones.
func TestCanonicalPoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	encs := [][]byte{
		unhex(t, "0100000000000000000000000000000000000000000000000000000000000000"),
		unhex(t, "0100000000000000000000000000000000000000000000000000000000000080"),
		unhex(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
		unhex(t, "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"),
		unhex(t, "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
		unhex(t, "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f"),
		unhex(t, "0000000000000000000000000000000000000000000000000000000000000000"),
		unhex(t, "0000000000000000000000000000000000000000000000000000000000000080"),
	}
	for range 2000 {
		b := make([]byte, 32)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		encs = append(encs, b)
	}
	for _, b := range encs {
		p, err := new(edwards25519.Point).SetBytes(b)
		if err != nil {
			continue // not a point: the batch leaves it to ed25519.Verify
		}
		assert.Equal(t, slices.Equal(p.Bytes(), b), canonicalPoint(b), "%x", b)
	}
	for y := range 19 { // y + p fits in 255 bits for y < 19
		b := make([]byte, 32)
		b[0] = byte(y)
		if p, err := new(edwards25519.Point).SetBytes(addP(b)); err == nil {
			assert.True(t, canonicalPoint(p.Bytes()))
			assert.False(t, canonicalPoint(addP(b)), "y=%d+p", y)
		}
	}
}

// addP returns b + p, for b < 19.
func addP(b []byte) []byte {
	out := []byte{0xed}
	out = append(out, bytes.Repeat([]byte{0xff}, 30)...)
	out = append(out, 0x7f)
	out[0] += b[0]
	return out
}

// TestPrimeOrder: [L]P = 0 for multiples of B only, not with any
// small-order point added.
func TestPrimeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	tors := torsion(t)
	for range 4 {
		P := new(edwards25519.Point).ScalarBaseMult(randScalar(t, rng))
		assert.True(t, primeOrder(P))
		for j := 1; j < 8; j++ {
			assert.False(t, primeOrder(new(edwards25519.Point).Add(P, tors[j])), "T%d", j)
		}
	}
	assert.True(t, primeOrder(edwards25519.NewIdentityPoint()))
}

// FuzzBatchVerify: a batch of good signatures and crafted edge cases, with
// corruptions the input chooses (three bytes each: entry, what, bit), gets
// from checkSigs exactly the rejections ed25519.Verify gives.
func FuzzBatchVerify(f *testing.F) {
	pool := benchJobs(12, 2)
	sp := specials(f, rand.New(rand.NewPCG(11, 12)))
	f.Add([]byte{8})
	f.Add([]byte{8, 3, 0, 17})
	f.Add([]byte{11, 0, 1, 200, 5, 4, 3})
	f.Add([]byte{6, 2, 5, 0, 2, 6, 1, 4, 2, 9})
	f.Add([]byte{9, 1, 3, 77, 7, 3, 8})
	keys := batchKeys{}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		n := 1 + int(data[0])%len(pool)
		jobs := make([]sigJob, n)
		for i := range jobs {
			jobs[i] = sigJob{pub: slices.Clone(pool[i].pub), msg: slices.Clone(pool[i].msg), sig: slices.Clone(pool[i].sig)}
		}
		for c := data[1:]; len(c) >= 3; c = c[3:] {
			i, bit := int(c[0])%n, int(c[2])
			switch c[1] % 6 {
			case 0:
				jobs[i].sig[bit%256/8] ^= 1 << (bit % 8)
			case 1:
				jobs[i].sig[32+bit%256/8] ^= 1 << (bit % 8)
			case 2:
				jobs[i].pub[bit%256/8] ^= 1 << (bit % 8)
			case 3:
				jobs[i].msg[bit%len(jobs[i].msg)] ^= 1 << (bit % 8)
			case 4:
				k := bit % n
				jobs[i].sig, jobs[k].sig = jobs[k].sig, jobs[i].sig
			case 5:
				s := sp[bit%len(sp)].job
				jobs[i] = sigJob{pub: slices.Clone(s.pub), msg: slices.Clone(s.msg), sig: slices.Clone(s.sig)}
			}
		}
		got, want := failing(jobs, keys)
		require.Equal(t, want, got)
		if batchVerify(jobs, keys) {
			require.Empty(t, want)
		}
	})
}
