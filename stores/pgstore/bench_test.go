package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// benchCallers is how many goroutines allocate numbers at once.
const benchCallers = 64

// runCallers hands the numbers 1..b.N to benchCallers goroutines, each calling
// take once per number, and reports numbers/s.
func runCallers(b *testing.B, take func(ctx context.Context) error) {
	b.Helper()
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range benchCallers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && !failed.Load() {
				if err := take(ctx); err != nil {
					failed.Store(true)
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "numbers/s")
}

// BenchmarkSeedPattern64 is the raw counter-row pattern of seed 000 through
// pgx, the yardstick for the sequence package on PostgreSQL: 64 callers, each
// number in its own durable transaction that increments the stream's head
// row and inserts the event carrying the number.
func BenchmarkSeedPattern64(b *testing.B) {
	take := seedPattern(b)
	runCallers(b, func(ctx context.Context) error { return take(ctx, 0) })
}

// BenchmarkUpdateCounter64 is the same workload through pgstore's
// transactions: 64 callers each increment a counter item with Update (Tx.Get
// locks the row) and write a record item in the same commit.
func BenchmarkUpdateCounter64(b *testing.B) {
	s := pgtest.Open(b, &pgstore.Options{MaxConns: benchCallers})
	runCallers(b, func(ctx context.Context) error {
		_, err := incrementAndRecord(ctx, s)
		return err
	})
}

// incrementAndRecord takes the next number of "counter" and writes the record
// that carries it, in one transaction.
func incrementAndRecord(ctx context.Context, s *pgstore.Store) (int, error) {
	n := 0
	err := s.Update(ctx, func(tx stores.Tx) error {
		n = 0
		it, err := tx.Get("counter")
		switch {
		case errors.Is(err, stores.ErrNotFound):
		case err != nil:
			return err
		default:
			if n, err = strconv.Atoi(string(it.Value)); err != nil {
				return err
			}
		}
		n++
		if err := tx.Put("counter", []byte(strconv.Itoa(n))); err != nil {
			return err
		}
		return tx.Put(fmt.Sprintf("record/%012d", n), []byte(`{"by":"bench"}`))
	})
	return n, err
}
