package noydb_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Whole-SDK benchmarks: what a user pays through noydb.Open, with the
// ledger on (every allocation and every record write is a ledger entry).

func benchVault(b *testing.B, st stores.Store) *vault.Vault {
	b.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{User: "firm", Secret: []byte("s"), Store: st,
		KDF: cheapKDF, InsecureAllowWeakKDF: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	v, err := db.OpenVault(context.Background(), "books")
	if err != nil {
		b.Fatal(err)
	}
	return v
}

func benchStores() map[string]func(b *testing.B) stores.Store {
	return map[string]func(b *testing.B) stores.Store{
		"memstore": func(b *testing.B) stores.Store { return memstore.New() },
		"filestore": func(b *testing.B) stores.Store {
			st, err := filestore.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		},
		"badgerstore": func(b *testing.B) stores.Store {
			st, err := badgerstore.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// BenchmarkPut1KiB and BenchmarkGet1KiB: a 1 KiB record through a collection.
func BenchmarkPut1KiB(b *testing.B) {
	for name, newStore := range benchStores() {
		b.Run(name, func(b *testing.B) {
			c := vault.CollectionOf[Invoice](benchVault(b, newStore(b)), "invoices")
			rec := Invoice{Notes: strings.Repeat("x", 1024)}
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				if err := c.Put(ctx, fmt.Sprint(i%1000), rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGet1KiB(b *testing.B) {
	for name, newStore := range benchStores() {
		b.Run(name, func(b *testing.B) {
			c := vault.CollectionOf[Invoice](benchVault(b, newStore(b)), "invoices")
			ctx := context.Background()
			for i := range 100 {
				if err := c.Put(ctx, fmt.Sprint(i), Invoice{Notes: strings.Repeat("x", 1024)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := c.Get(ctx, fmt.Sprint(i%100)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenDefaultKDF: unlocking an existing vault at the default cost
// (Argon2id t=3, 64 MiB, p=4), the price of every OpenVault.
func BenchmarkOpenDefaultKDF(b *testing.B) {
	ctx := context.Background()
	st := memstore.New()
	cfg := noydb.Config{User: "firm", Secret: []byte("s"), Store: st}
	db, err := noydb.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.OpenVault(ctx, "books"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		db, err := noydb.Open(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.OpenVault(ctx, "books"); err != nil {
			b.Fatal(err)
		}
	}
}

func rate(b *testing.B, n int64) {
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "numbers/s")
}

// BenchmarkVaultNext: one goroutine calling Next on memstore, each number
// with its ledger entry in the same commit.
func BenchmarkVaultNext(b *testing.B) {
	seq, err := benchVault(b, memstore.New()).Sequence("bench", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := seq.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
	rate(b, int64(b.N))
}

// BenchmarkVaultNextAt: BenchmarkVaultNext on a series with yearly
// periods, every number dated into one period: the cost of choosing the
// period from the document's date.
func BenchmarkVaultNextAt(b *testing.B) {
	seq, err := benchVault(b, memstore.New()).Sequence("bench", sequence.Options{Period: sequence.PeriodYear})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	date := time.Date(2026, time.March, 15, 10, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := seq.NextAt(ctx, date); err != nil {
			b.Fatal(err)
		}
	}
	rate(b, int64(b.N))
}

// parallelNext runs Next from about callers goroutines, failing on any error.
func parallelNext(b *testing.B, callers int, next func(context.Context) error) {
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	var failures, contention atomic.Int64
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := next(ctx); err != nil {
				failures.Add(1)
				if errors.Is(err, sequence.ErrContention) {
					contention.Add(1)
				}
			}
		}
	})
	b.StopTimer()
	if failures.Load() > 0 {
		b.Fatalf("%d failures (%d contention)", failures.Load(), contention.Load())
	}
	rate(b, int64(b.N))
}

// BenchmarkVaultNextParallel256: about 256 callers on one series in memstore.
func BenchmarkVaultNextParallel256(b *testing.B) {
	seq, err := benchVault(b, memstore.New()).Sequence("bench", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	parallelNext(b, 256, func(ctx context.Context) error { _, err := seq.Next(ctx); return err })
}

// BenchmarkBadgerDurable64 compares, on durable badger with 64 callers on
// one hot series, our Next (combined, with ledger entries) against a plain
// per-call read and compare-and-swap loop on a counter key.
func BenchmarkBadgerDurable64(b *testing.B) {
	b.Run("vault-next", func(b *testing.B) {
		st, err := badgerstore.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		seq, err := benchVault(b, st).Sequence("bench", sequence.Options{})
		if err != nil {
			b.Fatal(err)
		}
		parallelNext(b, 64, func(ctx context.Context) error { _, err := seq.Next(ctx); return err })
	})
	b.Run("plain-cas", func(b *testing.B) {
		st, err := badgerstore.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		key, err := crypto.GenerateKey()
		if err != nil {
			b.Fatal(err)
		}
		parallelNext(b, 64, func(ctx context.Context) error {
			// Retry until it wins, as a user's loop would; the bound only
			// catches a livelock. (One caller can lose many races in a row:
			// the caller that just committed, having led badgerstore's
			// group commit, is back first.)
			for range 1 << 20 {
				it, err := st.Get(ctx, "counter")
				var n uint64
				switch {
				case err == nil:
					plain, err := crypto.Open(key, it.Value, nil)
					if err != nil {
						return err
					}
					n = binary.BigEndian.Uint64(plain)
				case !errors.Is(err, stores.ErrNotFound):
					return err
				}
				sealed, err := crypto.Seal(key, binary.BigEndian.AppendUint64(nil, n+1), nil)
				if err != nil {
					return err
				}
				if _, err = st.CompareAndSwap(ctx, "counter", it.Version, sealed); !errors.Is(err, stores.ErrConflict) {
					return err
				}
			}
			return errors.New("plain cas: gave up after 2^20 conflicts")
		})
	})
}
