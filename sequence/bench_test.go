package sequence_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// reportRate reports allocations per second.
func reportRate(b *testing.B, n int64) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "numbers/s")
}

func benchNext(b *testing.B, store stores.Store) {
	svc := sequence.NewService(store, newSealer(), "", sequence.Config{})
	q, err := svc.Sequence("bench", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, int64(b.N))
}

// BenchmarkNext is one goroutine calling Next on memstore (transactional path).
func BenchmarkNext(b *testing.B) { benchNext(b, memstore.New()) }

// BenchmarkNextCASOnly is BenchmarkNext with memstore's Transactor hidden.
func BenchmarkNextCASOnly(b *testing.B) {
	benchNext(b, faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true}))
}

// parallel runs next from about goroutines goroutines and fails on any error.
func parallel(b *testing.B, goroutines int, next func(context.Context) error) {
	b.SetParallelism((goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var contention, failures atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := next(ctx); err != nil {
				if errors.Is(err, sequence.ErrContention) {
					contention.Add(1)
				}
				failures.Add(1)
			}
		}
	})
	b.StopTimer()
	if failures.Load() > 0 {
		b.Fatalf("%d failures, %d of them contention errors", failures.Load(), contention.Load())
	}
	reportRate(b, int64(b.N))
}

func nextOf(q *sequence.Sequence) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := q.Next(ctx)
		return err
	}
}

// BenchmarkNextParallel256 is about 256 goroutines calling Next on one series in memstore.
func BenchmarkNextParallel256(b *testing.B) {
	svc := sequence.NewService(memstore.New(), newSealer(), "", sequence.Config{})
	q, err := svc.Sequence("bench", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	parallel(b, 256, nextOf(q))
}
