package badgerstore_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// The device side of local-first sync (issue 13): a first pull writes
// 100,000 records of 1 KiB into a durable badger store on disk. Sync's
// target is 20,000 records/s end to end; the store's raw write should run
// at three times that at least.
//
//	go test -run '^$' -bench BenchmarkHub -benchtime 1x ./stores/badgerstore/
const (
	hubRecords   = 100_000
	hubValueSize = 1024
)

func hubValue() []byte {
	v := make([]byte, hubValueSize)
	_, _ = rand.Read(v)
	return v
}

func hubKey(i int) string { return fmt.Sprintf("vault/rec/%08d", i) }

func openDisk(b *testing.B) *badgerstore.Store {
	b.Helper()
	st, err := badgerstore.Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// BenchmarkHubBadgerTx writes 100,000 values of 1 KiB in Update
// transactions of 1,000 keys, each a durable commit.
func BenchmarkHubBadgerTx(b *testing.B) {
	value := hubValue()
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		st := openDisk(b)
		b.StartTimer()
		for lo := 0; lo < hubRecords; lo += 1000 {
			err := st.Update(ctx, func(tx stores.Tx) error {
				for i := lo; i < lo+1000; i++ {
					if err := tx.Put(hubKey(i), value); err != nil {
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
	b.ReportMetric(float64(hubRecords*b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkHubBadgerPut writes 100,000 values of 1 KiB with Put from 64
// goroutines at once (the store commits them in groups).
func BenchmarkHubBadgerPut(b *testing.B) {
	value := hubValue()
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		st := openDisk(b)
		b.StartTimer()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < hubRecords; i = next.Add(1) - 1 {
					if _, err := st.Put(ctx, hubKey(int(i)), value); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(hubRecords*b.N)/b.Elapsed().Seconds(), "records/s")
}
