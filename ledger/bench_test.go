package ledger_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
)

// BenchmarkAppend appends batches of 1 and 100 entries per commit, on
// memstore with transactions and with compare-and-swap only.
func BenchmarkAppend(b *testing.B) {
	for _, k := range storeKinds {
		for _, batch := range []int{1, 100} {
			b.Run(k.name+"/batch="+strconv.Itoa(batch), func(b *testing.B) {
				l := newLedger(b, k.make())
				entries := make([]ledger.Entry, batch)
				for i := range entries {
					entries[i] = fact(i)
				}
				ctx := context.Background()
				n := 0
				start := time.Now()
				for b.Loop() {
					_, err := l.Append(ctx, entries...)
					require.NoError(b, err)
					n += batch
				}
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "entries/s")
			})
		}
	}
}

// BenchmarkAppendParallel appends one entry per call from many goroutines
// on one Ledger: the calls are combined into group commits.
func BenchmarkAppendParallel(b *testing.B) {
	for _, k := range storeKinds {
		b.Run(k.name, func(b *testing.B) {
			l := newLedger(b, k.make())
			ctx := context.Background()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Append(ctx, fact(1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkVerify verifies a ledger of 100,000 entries on memstore; the
// target is at least 200,000 entries/s.
func BenchmarkVerify(b *testing.B) {
	const size = 100_000
	l := newLedger(b, storeKinds[0].make())
	ctx := context.Background()
	batch := make([]ledger.Entry, 1000)
	for i := 0; i < size; i += len(batch) {
		for j := range batch {
			batch[j] = fact(i + j)
		}
		_, err := l.Append(ctx, batch...)
		require.NoError(b, err)
	}
	var n uint64
	start := time.Now()
	for b.Loop() {
		rep, err := l.Verify(ctx)
		require.NoError(b, err)
		n += rep.Entries
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "entries/s")
}

// BenchmarkVerifySigned verifies ledgers of signed commits on memstore:
// written 1,000 entries per Append, by 64 callers appending one entry each
// (the commits the batch makes of them), and one entry per commit, the
// worst case. The target is at least 100,000 entries/s for a ledger written
// by many callers, and for a lone writer's one entry per commit. Verify
// checks one Ed25519 signature per commit, 256 at a time in one batch
// equation (batchsig.go: about 10 microseconds of one core per signature,
// against about 50 for ed25519.Verify), on GOMAXPROCS workers.
func BenchmarkVerifySigned(b *testing.B) {
	for _, c := range []struct {
		name               string
		size, callers, per int
	}{
		{"commit=1000", 100_000, 1, 1000},
		{"callers=64", 100_000, 64, 1},
		{"commit=1", 20_000, 1, 1},
	} {
		b.Run(c.name, func(b *testing.B) {
			l := signedOn(storeKinds[0].make(), "olga", olga, nil)
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			for range c.callers {
				wg.Go(func() {
					batch := make([]ledger.Entry, c.per)
					for {
						i := int(next.Add(int64(c.per))) - c.per
						if i >= c.size {
							return
						}
						for j := range batch {
							batch[j] = fact(i + j)
						}
						_, err := l.Append(ctx, batch...)
						assert.NoError(b, err)
					}
				})
			}
			wg.Wait()
			commits := 0
			for _, e := range readAll(b, l, 1) {
				if len(e.Signature) > 0 {
					commits++
				}
			}
			var n uint64
			start := time.Now()
			for b.Loop() {
				rep, err := l.Verify(ctx)
				require.NoError(b, err)
				n += rep.Entries
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "entries/s")
			b.ReportMetric(float64(c.size)/float64(commits), "entries/commit")
		})
	}
}

// BenchmarkAppendSigned is BenchmarkAppend with every entry signed.
func BenchmarkAppendSigned(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run("tx/batch="+strconv.Itoa(batch), func(b *testing.B) {
			l := signedOn(storeKinds[0].make(), "olga", olga, nil)
			entries := make([]ledger.Entry, batch)
			for i := range entries {
				entries[i] = fact(i)
			}
			ctx := context.Background()
			n := 0
			start := time.Now()
			for b.Loop() {
				_, err := l.Append(ctx, entries...)
				require.NoError(b, err)
				n += batch
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "entries/s")
		})
	}
}
