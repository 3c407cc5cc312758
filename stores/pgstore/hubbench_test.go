package pgstore_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// The paths local-first sync runs on a PostgreSQL hub (issue 13): a first
// pull reads a whole vault under one prefix, an incremental pull fetches
// the records a change feed names, a push writes a batch of changed records
// in transactions. Sync's targets are 20,000 records/s for a first pull of
// 100,000 records of 1 KiB and 10,000 records/s for a push of 10,000; it
// adds sealing, a ledger entry per record and verification on top, so the
// raw paths measured here should run at three times that at least.
//
// Run them (one run each: the fill is the slow part) with
//
//	scripts/with-postgres go test -run '^$' -bench BenchmarkHub -benchtime 1x ./stores/pgstore/
const (
	hubRecords   = 100_000 // records of a first pull
	hubPush      = 10_000  // records of a push, and keys of a fetch
	hubValueSize = 1024
)

// hubValue is 1 KiB of random bytes, as incompressible as a sealed value.
func hubValue() []byte {
	v := make([]byte, hubValueSize)
	_, _ = rand.Read(v)
	return v
}

// hubKey is the key of record i under prefix: ids that sort in order.
func hubKey(prefix string, i int) string { return fmt.Sprintf("%s%08d", prefix, i) }

// hubFill writes records 0..n-1 under prefix in transactions of 1,000 keys.
func hubFill(b *testing.B, st stores.Transactor, prefix string, n int) {
	b.Helper()
	value := hubValue()
	for lo := 0; lo < n; lo += 1000 {
		err := st.Update(context.Background(), func(tx stores.Tx) error {
			for i := lo; i < min(n, lo+1000); i++ {
				if err := tx.Put(hubKey(prefix, i), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
}

// reportRecords reports records/s over the benchmark's loop, which handled
// perLoop records each turn.
func reportRecords(b *testing.B, perLoop int) {
	b.ReportMetric(float64(perLoop*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkHubList reads 100,000 values of 1 KiB under one prefix with List
// (the first pull's read), among 10,000 keys under another prefix that
// sorts after it.
func BenchmarkHubList(b *testing.B) {
	s := pgtest.Open(b, nil)
	hubFill(b, s, "vault/rec/", hubRecords)
	hubFill(b, s, "vault/tail/", hubPush)
	ctx := context.Background()
	for b.Loop() {
		n := 0
		for it, err := range s.List(ctx, "vault/rec/") {
			if err != nil {
				b.Fatal(err)
			}
			if len(it.Value) != hubValueSize {
				b.Fatalf("value of %d bytes", len(it.Value))
			}
			n++
		}
		if n != hubRecords {
			b.Fatalf("listed %d records, want %d", n, hubRecords)
		}
	}
	reportRecords(b, hubRecords)
}

// hubSpread returns the keys of every tenth record of hubFill's, hubPush of
// them: what an incremental pull names is scattered through the vault.
func hubSpread(prefix string) []string {
	keys := make([]string, hubPush)
	for i := range keys {
		keys[i] = hubKey(prefix, i*10)
	}
	return keys
}

// BenchmarkHubPrefetch reads 10,000 given keys of 100,000 with Tx.Prefetch
// and Tx.Get in one transaction (which locks them).
func BenchmarkHubPrefetch(b *testing.B) {
	s := pgtest.Open(b, nil)
	hubFill(b, s, "vault/rec/", hubRecords)
	keys := hubSpread("vault/rec/")
	ctx := context.Background()
	for b.Loop() {
		err := s.Update(ctx, func(tx stores.Tx) error {
			if err := tx.(stores.Prefetcher).Prefetch(keys); err != nil {
				return err
			}
			for _, k := range keys {
				if _, err := tx.Get(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reportRecords(b, hubPush)
}

// BenchmarkHubTxWrite writes 10,000 values of 1 KiB (a push) in
// transactions of 100, 1,000 and 10,000 keys; the keys exist already, as the
// records a push changes do.
func BenchmarkHubTxWrite(b *testing.B) {
	for _, per := range []int{100, 1000, 10_000} {
		b.Run(fmt.Sprintf("tx=%d", per), func(b *testing.B) {
			s := pgtest.Open(b, nil)
			hubFill(b, s, "vault/rec/", hubPush)
			value := hubValue()
			ctx := context.Background()
			for b.Loop() {
				for lo := 0; lo < hubPush; lo += per {
					err := s.Update(ctx, func(tx stores.Tx) error {
						for i := lo; i < lo+per; i++ {
							if err := tx.Put(hubKey("vault/rec/", i), value); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			reportRecords(b, hubPush)
		})
	}
}

// BenchmarkHubPullRaw is a first pull without the sync code: List 100,000
// values of 1 KiB from PostgreSQL and write them into a durable badger
// store on disk in transactions of 1,000 keys.
func BenchmarkHubPullRaw(b *testing.B) {
	s := pgtest.Open(b, nil)
	hubFill(b, s, "vault/rec/", hubRecords)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		dev, err := badgerstore.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var batch []stores.Item
		flush := func() {
			err := dev.Update(ctx, func(tx stores.Tx) error {
				for _, it := range batch {
					if err := tx.Put(it.Key, it.Value); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
		for it, err := range s.List(ctx, "vault/rec/") {
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, it)
			if len(batch) == 1000 {
				flush()
			}
		}
		flush()
		b.StopTimer()
		if err := dev.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportRecords(b, hubRecords)
}

// BenchmarkHubGetMany reads 10,000 given keys of 100,000 with GetMany, one
// statement, no locks: the fetch of the records an incremental pull names.
func BenchmarkHubGetMany(b *testing.B) {
	s := pgtest.Open(b, nil)
	hubFill(b, s, "vault/rec/", hubRecords)
	keys := hubSpread("vault/rec/")
	ctx := context.Background()
	for b.Loop() {
		items, err := stores.GetMany(ctx, s, keys)
		if err != nil {
			b.Fatal(err)
		}
		if len(items) != len(keys) {
			b.Fatalf("got %d items, want %d", len(items), len(keys))
		}
	}
	reportRecords(b, hubPush)
}

// hubFeed writes positions 1..n of a feed under dir, laid out as the
// ledger's entries (20-digit positions), with values of 200 bytes.
func hubFeed(b *testing.B, st stores.Transactor, dir string, n int) {
	b.Helper()
	value := make([]byte, 200)
	for lo := 1; lo <= n; lo += 5000 {
		err := st.Update(context.Background(), func(tx stores.Tx) error {
			for seq := lo; seq < min(n+1, lo+5000); seq++ {
				if err := tx.Put(fmt.Sprintf("%s%020d", dir, seq), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatalf("feed: %v", err)
		}
	}
}

// BenchmarkHubFeedAfter reads the last 10 positions of a feed of 10,000 and
// of 100,000 after a cursor: with ListAfter, and (prefix=narrowest) as the
// ledger's listStored reads a range today, with List of the narrowest prefix
// covering the positions, which for a cursor just below a power of ten is
// the whole feed.
func BenchmarkHubFeedAfter(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		s := pgtest.Open(b, nil)
		hubFeed(b, s, "vault/_ledger/", n)
		ctx := context.Background()
		cursor := n - 10
		after := fmt.Sprintf("vault/_ledger/%020d", cursor)
		b.Run(fmt.Sprintf("vault=%d/ListAfter", n), func(b *testing.B) {
			for b.Loop() {
				got := 0
				for _, err := range s.ListAfter(ctx, "vault/_ledger/", after) {
					if err != nil {
						b.Fatal(err)
					}
					got++
				}
				if got != 10 {
					b.Fatalf("read %d positions, want 10", got)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/read")
		})
		b.Run(fmt.Sprintf("vault=%d/prefix=narrowest", n), func(b *testing.B) {
			lo, hi := fmt.Sprintf("%020d", cursor+1), fmt.Sprintf("%020d", n)
			common := 0
			for common < len(lo) && lo[common] == hi[common] {
				common++
			}
			prefix := "vault/_ledger/" + lo[:common]
			for b.Loop() {
				got := 0
				for it, err := range s.List(ctx, prefix) {
					if err != nil {
						b.Fatal(err)
					}
					if it.Key > after {
						got++
					}
				}
				if got != 10 {
					b.Fatalf("read %d positions, want 10", got)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/read")
		})
	}
}

// BenchmarkHubIncremental is the store work of an incremental sync of 10
// changes each way, between a PostgreSQL hub and a durable badger device
// that both hold a vault of 10,000 and of 100,000 records of 1 KiB with a
// feed position per record: pull (read the hub's feed after the device's
// cursor, fetch the 10 records it names with GetMany, write them and 10
// device-ledger entries in one badger transaction), then push (10 records
// and their 10 feed positions in one PostgreSQL transaction).
func BenchmarkHubIncremental(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("vault=%d", n), func(b *testing.B) {
			hub := pgtest.Open(b, nil)
			hubFill(b, hub, "vault/rec/", n)
			hubFeed(b, hub, "vault/_ledger/", n)
			dev, err := badgerstore.Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = dev.Close() })
			hubFill(b, dev, "vault/rec/", n)
			hubFeed(b, dev, "vault/_ledger/", n)
			value := hubValue()
			ctx := context.Background()
			head, devHead := n, n
			for b.Loop() {
				// Another device pushed 10 changes; this one pulls them.
				b.StopTimer()
				err := hub.Update(ctx, func(tx stores.Tx) error {
					for range 10 {
						head++
						if err := tx.Put(hubKey("vault/rec/", (head*7919)%n), value); err != nil {
							return err
						}
						if err := tx.Put(fmt.Sprintf("vault/_ledger/%020d", head), []byte(hubKey("vault/rec/", (head*7919)%n))); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				cursor := fmt.Sprintf("vault/_ledger/%020d", head-10)
				b.StartTimer()

				var names []string
				for it, err := range stores.ListAfter(ctx, hub, "vault/_ledger/", cursor) {
					if err != nil {
						b.Fatal(err)
					}
					names = append(names, string(it.Value))
				}
				recs, err := stores.GetMany(ctx, hub, names)
				if err != nil || len(recs) != 10 {
					b.Fatalf("fetched %d records: %v", len(recs), err)
				}
				err = dev.Update(ctx, func(tx stores.Tx) error {
					for _, it := range recs {
						if _, err := tx.Get(it.Key); err != nil {
							return err
						}
						if err := tx.Put(it.Key, it.Value); err != nil {
							return err
						}
						devHead++
						if err := tx.Put(fmt.Sprintf("vault/_ledger/%020d", devHead), value[:200]); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				// Push 10 local changes.
				err = hub.Update(ctx, func(tx stores.Tx) error {
					keys := make([]string, 10)
					for i := range keys {
						keys[i] = hubKey("vault/rec/", (head+i)*104729%n)
					}
					if err := tx.(stores.Prefetcher).Prefetch(append(keys, fmt.Sprintf("vault/_ledger/%020d", head+1))); err != nil {
						return err
					}
					for _, k := range keys {
						if _, err := tx.Get(k); err != nil {
							return err
						}
						head++
						if err := tx.Put(k, value); err != nil {
							return err
						}
						if err := tx.Put(fmt.Sprintf("vault/_ledger/%020d", head), []byte(k)); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()*1000/float64(b.N), "ms/sync")
		})
	}
}

// BenchmarkHubPush is a push of 10,000 changed records of 1 KiB without the
// sync code, in transactions of 1,000 records: each transaction prefetches
// (reads and locks) the records and the feed's head, checks each record's
// current version, and writes each record and a feed position naming it,
// then the new head.
func BenchmarkHubPush(b *testing.B) {
	s := pgtest.Open(b, nil)
	hubFill(b, s, "vault/rec/", hubRecords)
	hubFeed(b, s, "vault/_ledger/", hubRecords)
	value := hubValue()
	ctx := context.Background()
	head := hubRecords
	for b.Loop() {
		for lo := 0; lo < hubPush; lo += 1000 {
			err := s.Update(ctx, func(tx stores.Tx) error {
				keys := make([]string, 0, 1001)
				for i := lo; i < lo+1000; i++ {
					keys = append(keys, hubKey("vault/rec/", i*10))
				}
				if err := tx.(stores.Prefetcher).Prefetch(append(keys, "vault/_ledger/head")); err != nil {
					return err
				}
				if _, err := tx.Get("vault/_ledger/head"); err != nil && !errors.Is(err, stores.ErrNotFound) {
					return err
				}
				for _, k := range keys {
					if _, err := tx.Get(k); err != nil {
						return err
					}
					head++
					if err := tx.Put(k, value); err != nil {
						return err
					}
					if err := tx.Put(fmt.Sprintf("vault/_ledger/%020d", head), []byte(k)); err != nil {
						return err
					}
				}
				return tx.Put("vault/_ledger/head", []byte(fmt.Sprint(head)))
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRecords(b, hubPush)
}

// BenchmarkHubPullViaFeed is a first pull that follows the hub's feed
// rather than listing the records: read 100,000 feed positions with
// ListAfter from the start, fetch the records they name with GetMany 1,000
// at a time, and write each record and a device-ledger entry into a durable
// badger store in one transaction per 1,000.
func BenchmarkHubPullViaFeed(b *testing.B) {
	s := pgtest.Open(b, nil)
	hubFill(b, s, "vault/rec/", hubRecords)
	err := s.Update(context.Background(), func(tx stores.Tx) error {
		for i := range hubRecords {
			if err := tx.Put(fmt.Sprintf("vault/_ledger/%020d", i+1), []byte(hubKey("vault/rec/", i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	entry := make([]byte, 200)
	for b.Loop() {
		b.StopTimer()
		dev, err := badgerstore.Open(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		seq := 0
		names := make([]string, 0, 1000)
		flush := func() {
			recs, err := stores.GetMany(ctx, s, names)
			if err != nil || len(recs) != len(names) {
				b.Fatalf("fetched %d of %d: %v", len(recs), len(names), err)
			}
			err = dev.Update(ctx, func(tx stores.Tx) error {
				for _, it := range recs {
					if err := tx.Put(it.Key, it.Value); err != nil {
						return err
					}
					seq++
					if err := tx.Put(fmt.Sprintf("vault/_ledger/%020d", seq), entry); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			names = names[:0]
		}
		for it, err := range stores.ListAfter(ctx, s, "vault/_ledger/", "") {
			if err != nil {
				b.Fatal(err)
			}
			names = append(names, string(it.Value))
			if len(names) == 1000 {
				flush()
			}
		}
		flush()
		if seq != hubRecords {
			b.Fatalf("pulled %d records", seq)
		}
		b.StopTimer()
		if err := dev.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportRecords(b, hubRecords)
}
