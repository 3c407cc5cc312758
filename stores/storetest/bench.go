package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/noydb-go/noydb/stores"
)

// benchKeys is how many distinct keys the benchmarks cycle through.
const benchKeys = 1024

// Bench runs the same benchmarks on the stores built by newStore: Put and Get
// of 1 KiB values from one goroutine, and Put and Get from many goroutines at
// once (which is where a store that batches commits shines). newStore is
// called once per benchmark and must return an empty store; Bench closes it.
func Bench(b *testing.B, newStore func(b *testing.B) stores.Store) {
	value := pattern(1024, 42)
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench/%04d", i)
	}
	open := func(b *testing.B) stores.Store {
		st := newStore(b)
		b.Cleanup(func() {
			if err := st.Close(); err != nil {
				b.Errorf("Close: %v", err)
			}
		})
		return st
	}
	fill := func(b *testing.B, st stores.Store) {
		for _, k := range keys {
			if _, err := st.Put(context.Background(), k, value); err != nil {
				b.Fatalf("Put: %v", err)
			}
		}
	}

	b.Run("Put1KiB", func(b *testing.B) {
		st := open(b)
		ctx := context.Background()
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := st.Put(ctx, keys[i%benchKeys], value); err != nil {
				b.Fatalf("Put: %v", err)
			}
			i++
		}
	})
	b.Run("Get1KiB", func(b *testing.B) {
		st := open(b)
		fill(b, st)
		ctx := context.Background()
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := st.Get(ctx, keys[i%benchKeys]); err != nil {
				b.Fatalf("Get: %v", err)
			}
			i++
		}
	})
	b.Run("PutParallel1KiB", func(b *testing.B) {
		st := open(b)
		ctx := context.Background()
		var next atomic.Int64
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				if _, err := st.Put(ctx, keys[i%benchKeys], value); err != nil {
					b.Errorf("Put: %v", err)
					return
				}
			}
		})
	})
	b.Run("GetParallel1KiB", func(b *testing.B) {
		st := open(b)
		fill(b, st)
		ctx := context.Background()
		var next atomic.Int64
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				if _, err := st.Get(ctx, keys[i%benchKeys]); err != nil {
					b.Errorf("Get: %v", err)
					return
				}
			}
		})
	})
}
