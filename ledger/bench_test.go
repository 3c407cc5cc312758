package ledger_test

import (
	"context"
	"strconv"
	"testing"
	"time"

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

// BenchmarkVerifySigned verifies a ledger of 100,000 signed entries on
// memstore, checking each signature; the target is at least 100,000
// entries/s. Ed25519 verification costs tens of microseconds of one core
// per entry, spread over GOMAXPROCS workers.
func BenchmarkVerifySigned(b *testing.B) {
	const size = 100_000
	l := signedOn(storeKinds[0].make(), "olga", olga, nil)
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
