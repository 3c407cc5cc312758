package noydb_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// longLedgerEntries is the length of the ledger the open and sync
// benchmarks build (NOYDB_LONG_LEDGER overrides it).
func longLedgerEntries() int {
	if n, err := strconv.Atoi(os.Getenv("NOYDB_LONG_LEDGER")); err == nil && n > 0 {
		return n
	}
	return 100_000
}

// fillLongLedger writes about n ledger entries through v (numbers of one
// series, from 16 goroutines), with a few people changes among them: three
// grants, one revocation and a narrowing, spread over the ledger.
func fillLongLedger(b *testing.B, v *vault.Vault, n int) {
	b.Helper()
	ctx := context.Background()
	seq, err := v.Sequence("bench", sequence.Options{})
	if err != nil {
		b.Fatal(err)
	}
	people := []func() error{
		func() error { return v.Grant(ctx, "will", vault.Secret([]byte("w")), vault.RoleWriter) },
		func() error { return v.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader) },
		func() error { return v.Grant(ctx, "carol", vault.Secret([]byte("c")), vault.RoleWriter) },
		func() error { return v.Revoke(ctx, "carol", vault.RevokeWithoutRotation()) },
		func() error { return v.SetCollections(ctx, "will", "notes") },
	}
	const workers = 16
	per := n / (len(people) + 1)
	for _, change := range people {
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				for range per / workers {
					if _, err := seq.Next(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		if err := change(); err != nil {
			b.Fatal(err)
		}
	}
	for range per {
		if _, err := seq.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// copyStore copies every value of src into dst: a store this process
// has not opened a vault on, as after a restart (the replay of people a
// process keeps is per store).
func copyStore(b *testing.B, src, dst stores.Store) {
	b.Helper()
	ctx := context.Background()
	for it, err := range src.List(ctx, "") {
		if err != nil {
			b.Fatal(err)
		}
		if _, err := dst.Put(ctx, it.Key, it.Value); err != nil {
			b.Fatal(err)
		}
	}
}

// restartable is a store that a benchmark iteration can open as a new
// process would: memstore copied into a fresh one, badger closed and
// opened again on its folder.
type restartable struct {
	name    string
	first   stores.Store
	restart func(b *testing.B) stores.Store
}

func restartables(b *testing.B) []restartable {
	mem := memstore.New()
	dir := b.TempDir()
	bst, err := badgerstore.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	var cur stores.Store = bst
	b.Cleanup(func() { _ = cur.Close() })
	return []restartable{
		{name: "memstore", first: mem, restart: func(b *testing.B) stores.Store {
			st := memstore.New()
			copyStore(b, mem, st)
			return st
		}},
		{name: "badger", first: bst, restart: func(b *testing.B) stores.Store {
			if err := cur.Close(); err != nil {
				b.Fatal(err)
			}
			st, err := badgerstore.Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			cur = st
			return st
		}},
	}
}

// BenchmarkOpenLongLedger: opening a vault, in a process that has not
// opened it yet, whose ledger holds longLedgerEntries entries and a few
// people changes (the figure: 10 ms, however long the ledger).
// The key derivation is the cheap one of tests: what is measured is the
// check of the opener's keyring entry against the ledger's people.
func BenchmarkOpenLongLedger(b *testing.B) {
	ctx := context.Background()
	for _, r := range restartables(b) {
		b.Run(fmt.Sprintf("%s/entries=%d", r.name, longLedgerEntries()), func(b *testing.B) {
			v, err := vault.Open(ctx, personCfg(r.first, "olga", "o"))
			if err != nil {
				b.Fatal(err)
			}
			fillLongLedger(b, v, longLedgerEntries())
			if err := v.Close(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				st := r.restart(b)
				b.StartTimer()
				v, err := vault.Open(ctx, personCfg(st, "will", "w"))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := v.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkFirstSyncLongLedger: the first Sync of a device, in a process
// that has just opened it, when the device and the hub share a ledger of
// longLedgerEntries entries and a few people changes and nothing changed
// since the last sync (the figure: 20 ms, however long the
// ledger). The hub is a memstore copied afresh for each run; the device
// is each kind of restartable store.
func BenchmarkFirstSyncLongLedger(b *testing.B) {
	ctx := context.Background()
	for _, r := range restartables(b) {
		b.Run(fmt.Sprintf("%s/entries=%d", r.name, longLedgerEntries()), func(b *testing.B) {
			hub := memstore.New()
			cfg := hubPerson(r.first, hub, "olga", "o")
			v, err := vault.Open(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			fillLongLedger(b, v, longLedgerEntries())
			if _, err := v.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := v.Sync(ctx); err != nil {
				b.Fatal(err)
			}
			if err := v.Close(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				b.StopTimer()
				dev := r.restart(b)
				h := memstore.New()
				copyStore(b, hub, h)
				v, err := vault.Open(ctx, hubPerson(dev, h, "olga", "o"))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := v.Sync(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := v.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
