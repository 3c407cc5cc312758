package noydb_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Hot-path benchmarks that scripts/bench-hot runs next to those of
// bench_test.go and writepath_bench_test.go. They use only the SDK's public
// API and the helpers of those two files, so that the script can run them
// against an older commit that lacks them.

// peopleVault returns a vault on memstore whose owner ("firm") has granted
// a second person: a vault where signatures are needed to tell authors
// apart.
func peopleVault(b *testing.B) *vault.Vault {
	b.Helper()
	v := benchVault(b, memstore.New())
	if err := v.Grant(context.Background(), "clerk", vault.Secret([]byte("clerk's secret")), vault.RoleWriter); err != nil {
		b.Fatal(err)
	}
	return v
}

// BenchmarkVaultNextPeople is BenchmarkVaultNext in a vault of two people:
// the owner takes the numbers.
func BenchmarkVaultNextPeople(b *testing.B) {
	seq, err := peopleVault(b).Sequence("bench", sequence.Options{})
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

// BenchmarkVaultNextPeopleParallel256 is BenchmarkVaultNextParallel256 in
// a vault of two people.
func BenchmarkVaultNextPeopleParallel256(b *testing.B) {
	seq, err := peopleVault(b).Sequence("bench", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	parallelNext(b, 256, func(ctx context.Context) error { _, err := seq.Next(ctx); return err })
}

// BenchmarkVaultNextAfterSecretChange is BenchmarkVaultNext in a vault of
// one person who changed their secret: the cost of a number once the
// person's keys were renewed (a secret change, a recovery).
func BenchmarkVaultNextAfterSecretChange(b *testing.B) {
	v := benchVault(b, memstore.New())
	if err := v.ChangeSecret(context.Background(), []byte("s"), []byte("s2")); err != nil {
		b.Fatal(err)
	}
	seq, err := v.Sequence("bench", sequence.Options{})
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

// BenchmarkPutNumbered: one goroutine's Collection.PutNumbered on
// memstore, a distinct ~300 B record per number.
func BenchmarkPutNumbered(b *testing.B) {
	v := benchVault(b, memstore.New())
	seq, err := v.Sequence("invoices", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	c := vault.CollectionOf[Invoice](v, "records")
	ctx := context.Background()
	var n int64
	b.ReportAllocs()
	for b.Loop() {
		n++
		if _, err := c.PutNumbered(ctx, "inv-"+strconv.FormatInt(n, 10), seq, func(s sequence.Serial) (Invoice, error) {
			return writeRecord(int64(s.N)), nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkPut: one goroutine's Collection.Put on memstore, distinct ~300 B
// records.
func BenchmarkPut(b *testing.B) {
	c := vault.CollectionOf[Invoice](benchVault(b, memstore.New()), "records")
	ctx := context.Background()
	var n int64
	b.ReportAllocs()
	for b.Loop() {
		n++
		if err := c.Put(ctx, "inv-"+strconv.FormatInt(n, 10), writeRecord(n)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkBadgerGroupCommit64 is the best a program can do on raw badger
// (opened as badgerstore opens it) with 64 callers taking numbers of one
// counter, durably: the callers hand their requests to one committer,
// which, round after round, takes every request waiting, reads the
// counter, raises it by their count and commits that in one SyncWrites
// transaction, then answers them. BenchmarkBadgerDurable64's vault-next
// is compared to it by scripts/bench-hot.
func BenchmarkBadgerGroupCommit64(b *testing.B) {
	db := rawBadger(b)
	key := []byte("counter")
	type ask struct{ got chan uint64 }
	asks := make(chan ask, writeCallers)
	stop := make(chan struct{})
	var committer sync.WaitGroup
	var commitErr error
	committer.Go(func() {
		for {
			var round []ask
			select {
			case a := <-asks:
				round = append(round, a)
			case <-stop:
				return
			}
		more:
			for {
				select {
				case a := <-asks:
					round = append(round, a)
				default:
					break more
				}
			}
			var first uint64
			err := db.Update(func(txn *badger.Txn) error {
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
				first = n + 1
				return txn.Set(key, binary.BigEndian.AppendUint64(nil, n+uint64(len(round))))
			})
			for i, a := range round {
				if err != nil {
					commitErr = err
					a.got <- 0
					continue
				}
				a.got <- first + uint64(i)
			}
		}
	})
	taken := make([]uint64, writeCallers)
	callersRate(b, writeCallers, "numbers/s", func(_ context.Context, caller int) error {
		a := ask{got: make(chan uint64, 1)}
		asks <- a
		if n := <-a.got; n == 0 {
			return errors.New("group commit failed")
		}
		taken[caller]++
		return nil
	})
	close(stop)
	committer.Wait()
	if commitErr != nil {
		b.Fatal(commitErr)
	}
	var sum uint64
	for _, n := range taken {
		sum += n
	}
	err := db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			if got := binary.BigEndian.Uint64(v); got != sum {
				return errors.New("counter at " + strconv.FormatUint(got, 10) + " after " + strconv.FormatUint(sum, 10) + " numbers")
			}
			return nil
		})
	})
	if err != nil && !b.Failed() {
		b.Fatal(err)
	}
}
