package ledger

import (
	"crypto/ed25519"
	"fmt"
	"testing"

	"filippo.io/edwards25519"
)

func benchJobs(n, keys int) []sigJob {
	privs := make([]ed25519.PrivateKey, keys)
	for i := range privs {
		seed := make([]byte, 32)
		seed[0] = byte(i)
		privs[i] = ed25519.NewKeyFromSeed(seed)
	}
	jobs := make([]sigJob, n)
	for i := range jobs {
		p := privs[i%keys]
		msg := fmt.Appendf(nil, "entry %d of a ledger, some bytes of fields to sign, as long as an entry is", i)
		jobs[i] = sigJob{seq: uint64(i + 1), pub: p.Public().(ed25519.PublicKey), msg: msg, sig: ed25519.Sign(p, msg)}
	}
	return jobs
}

// BenchmarkBatchVerify: the cost per signature of batchVerify, against
// ed25519.Verify one at a time.
func BenchmarkBatchVerify(b *testing.B) {
	for _, n := range []int{1, 16, 64, 256} {
		jobs := benchJobs(n, 1)
		b.Run(fmt.Sprintf("batch/n=%d", n), func(b *testing.B) {
			keys := batchKeys{}
			for b.Loop() {
				if !batchVerify(jobs, keys) {
					b.Fatal("batch failed")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/sig")
		})
	}
	jobs := benchJobs(64, 1)
	b.Run("single", func(b *testing.B) {
		for b.Loop() {
			for _, j := range jobs {
				if !ed25519.Verify(j.pub, j.msg, j.sig) {
					b.Fatal("bad")
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(jobs)), "ns/sig")
	})
	b.Run("primeOrder", func(b *testing.B) {
		p, _ := new(edwards25519.Point).SetBytes(jobs[0].sig[:32])
		for b.Loop() {
			primeOrder(p)
		}
	})
	b.Run("decompress", func(b *testing.B) {
		for b.Loop() {
			new(edwards25519.Point).SetBytes(jobs[0].sig[:32])
		}
	})
}
