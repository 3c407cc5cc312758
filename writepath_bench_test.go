package noydb_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Benchmarks of the write path (issue 11): each SDK case runs in the same
// benchmark invocation as the baseline it is compared to, the baseline first,
// and reports its ratio to it with b.ReportMetric. Everything on badger is
// durable (SyncWrites on). scripts/bench-writepath runs them, with the
// PostgreSQL rows of stores/pgstore's BenchmarkFleet, and prints the table.
//
//	go test -run '^$' -bench 'BenchmarkBadgerPut|BenchmarkBadgerNext64Series|BenchmarkMemNext64Series' -benchtime 2s .

// writeCallers is how many goroutines write at once in the 64-caller rows.
const writeCallers = 64

// recordBytes is about how large a record of these benchmarks is: the raw
// badger value, and the JSON of the Invoice the vault seals.
const recordBytes = 300

// callersRate hands b.N operations to callers goroutines, each calling take
// (with its index, 0..callers-1) once per operation, reports the rate in unit
// (ops/s, numbers/s) and returns it. The first error fails b and stops every
// caller.
func callersRate(b *testing.B, callers int, unit string, take func(ctx context.Context, caller int) error) float64 {
	b.Helper()
	ctx := context.Background()
	var handed atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			for !failed.Load() && handed.Add(1) <= int64(b.N) {
				if err := take(ctx, c); err != nil {
					if !failed.Swap(true) {
						b.Errorf("caller %d: %v", c, err)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	r := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(r, unit)
	return r
}

// ratioTo reports rate/base as unit, when the baseline has run.
func ratioTo(b *testing.B, rate, base float64, unit string) {
	if base > 0 {
		b.ReportMetric(rate/base, unit)
	}
}

// durableBadger opens a badgerstore in a fresh folder with its defaults
// (SyncWrites on), closed when b ends.
func durableBadger(b *testing.B) *badgerstore.Store {
	b.Helper()
	st, err := badgerstore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// rawBadger opens badger itself in a fresh folder as badgerstore does
// (default options, SyncWrites on, silent), closed when b ends.
func rawBadger(b *testing.B) *badger.DB {
	b.Helper()
	db, err := badger.Open(badger.DefaultOptions(b.TempDir()).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// rawValue returns a random value of recordBytes bytes (so it compresses as
// badly as a sealed record) that starts with n, so no two are alike.
func rawValue(rng *rand.ChaCha8, n uint64) []byte {
	v := make([]byte, recordBytes)
	_, _ = rng.Read(v)
	binary.BigEndian.PutUint64(v, n)
	return v
}

// writeRecord returns the record number n of the Put benchmarks: its JSON is
// about recordBytes long and differs from every other's.
func writeRecord(n int64) Invoice {
	return Invoice{
		Number:   fmt.Sprintf("2026/%08d", n),
		Customer: "customer-" + strconv.FormatInt(n%997, 10),
		Total:    int(n % 100_000),
		Notes:    strings.Repeat("line item, ", 20)[:210] + strconv.FormatInt(n, 36),
	}
}

// countKeys returns how many keys db holds.
func countKeys(b *testing.B, db *badger.DB) int {
	b.Helper()
	n := 0
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkBadgerPut64: 64 writers of distinct ~300 B records, durable.
//
//	raw-badger-txn  64 goroutines, each write its own badger transaction (one Set) with SyncWrites
//	vault-put       64 goroutines calling Collection.Put on a vault over badgerstore
//
// Both report ops/s; vault-put reports its ratio to raw-badger-txn as x-raw.
func BenchmarkBadgerPut64(b *testing.B) {
	var raw float64
	b.Run("raw-badger-txn", func(b *testing.B) {
		db := rawBadger(b)
		var ids atomic.Int64
		rngs := make([]*rand.ChaCha8, writeCallers)
		for i := range rngs {
			rngs[i] = rand.NewChaCha8([32]byte{byte(i)})
		}
		raw = callersRate(b, writeCallers, "ops/s", func(_ context.Context, caller int) error {
			n := uint64(ids.Add(1))
			return db.Update(func(txn *badger.Txn) error {
				return txn.Set([]byte("rec-"+strconv.FormatUint(n, 10)), rawValue(rngs[caller], n))
			})
		})
		if got := countKeys(b, db); !b.Failed() && got != b.N {
			b.Fatalf("%d keys after %d transactions", got, b.N)
		}
	})
	b.Run("vault-put", func(b *testing.B) {
		c := vault.CollectionOf[Invoice](benchVault(b, durableBadger(b)), "records")
		var ids atomic.Int64
		r := callersRate(b, writeCallers, "ops/s", func(ctx context.Context, _ int) error {
			n := ids.Add(1)
			return c.Put(ctx, "inv-"+strconv.FormatInt(n, 10), writeRecord(n))
		})
		ratioTo(b, r, raw, "x-raw")
		if got, err := c.Count(context.Background()); !b.Failed() && (err != nil || got != b.N) {
			b.Fatalf("%d records (%v) after %d puts", got, err, b.N)
		}
	})
}

// BenchmarkBadgerPut1: one caller's Collection.Put on a vault over durable
// badger, distinct ~300 B records; ns/op is the latency of one Put.
func BenchmarkBadgerPut1(b *testing.B) {
	c := vault.CollectionOf[Invoice](benchVault(b, durableBadger(b)), "records")
	ctx := context.Background()
	var n int64
	for b.Loop() {
		n++
		if err := c.Put(ctx, "inv-"+strconv.FormatInt(n, 10), writeRecord(n)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "ops/s")
}

// seriesNext runs b.N calls of Next from writeCallers goroutines, caller i
// on series[i % len(series)], reports numbers/s, checks that each series'
// head is exactly the count of numbers taken from it, and returns the rate.
func seriesNext(b *testing.B, series []*sequence.Sequence) float64 {
	b.Helper()
	byCaller := make([]uint64, writeCallers) // each caller counts its own
	r := callersRate(b, writeCallers, "numbers/s", func(ctx context.Context, caller int) error {
		if _, err := series[caller%len(series)].Next(ctx); err != nil {
			return err
		}
		byCaller[caller]++
		return nil
	})
	if b.Failed() {
		return r
	}
	taken := make([]uint64, len(series))
	for c, n := range byCaller {
		taken[c%len(series)] += n
	}
	for i, s := range series {
		head, err := s.Peek(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if head != taken[i] {
			b.Fatalf("series %d at %d after %d numbers", i, head, taken[i])
		}
	}
	return r
}

// openSeries returns n series of v, named "s0", "s1", ….
func openSeries(b *testing.B, v *vault.Vault, n int) []*sequence.Sequence {
	b.Helper()
	out := make([]*sequence.Sequence, n)
	for i := range out {
		var err error
		if out[i], err = v.Sequence("s"+strconv.Itoa(i), sequence.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// BenchmarkBadgerNext64Series: 64 callers of Next on durable badger.
//
//	raw-rmw-64-counters  64 goroutines, each call a badger transaction reading, incrementing and writing its own counter
//	hot-series           64 callers of Next on one series of a vault
//	next-64-series       64 callers of Next, each on a series of its own
//
// All report numbers/s; next-64-series reports its ratio to hot-series as
// x-hot and to raw-rmw-64-counters as x-raw.
func BenchmarkBadgerNext64Series(b *testing.B) {
	var raw, hot float64
	b.Run("raw-rmw-64-counters", func(b *testing.B) {
		db := rawBadger(b)
		raw = callersRate(b, writeCallers, "numbers/s", func(_ context.Context, caller int) error {
			key := []byte("counter-" + strconv.Itoa(caller))
			return db.Update(func(txn *badger.Txn) error {
				var n uint64
				it, err := txn.Get(key)
				switch {
				case err == nil:
					if err := it.Value(func(v []byte) error { n = binary.BigEndian.Uint64(v); return nil }); err != nil {
						return err
					}
				case !errors.Is(err, badger.ErrKeyNotFound):
					return err
				}
				return txn.Set(key, binary.BigEndian.AppendUint64(nil, n+1))
			})
		})
		if b.Failed() {
			return
		}
		var sum uint64
		err := db.View(func(txn *badger.Txn) error {
			for c := range writeCallers {
				it, err := txn.Get([]byte("counter-" + strconv.Itoa(c)))
				if errors.Is(err, badger.ErrKeyNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				if err := it.Value(func(v []byte) error { sum += binary.BigEndian.Uint64(v); return nil }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if sum != uint64(b.N) {
			b.Fatalf("counters sum to %d after %d increments", sum, b.N)
		}
	})
	b.Run("hot-series", func(b *testing.B) {
		hot = seriesNext(b, openSeries(b, benchVault(b, durableBadger(b)), 1))
	})
	b.Run("next-64-series", func(b *testing.B) {
		r := seriesNext(b, openSeries(b, benchVault(b, durableBadger(b)), writeCallers))
		ratioTo(b, r, hot, "x-hot")
		ratioTo(b, r, raw, "x-raw")
	})
}

// BenchmarkMemNext64Series: 64 callers of Next on memstore, each on a series
// of its own (for information, next to BenchmarkVaultNext and
// BenchmarkVaultNextParallel256).
func BenchmarkMemNext64Series(b *testing.B) {
	seriesNext(b, openSeries(b, benchVault(b, memstore.New()), writeCallers))
}
