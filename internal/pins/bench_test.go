package pins_test

import (
	"sync/atomic"
	"testing"
)

// BenchmarkRaiseDurable: one raise at a time, each waiting for its write.
func BenchmarkRaiseDurable(b *testing.B) {
	s, err := openPins(b.TempDir(), "books", testID, newKey(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	var n uint64
	for b.Loop() {
		n++
		s.RaiseCounter("c", n)
	}
}

// BenchmarkRaiseDurableParallel64: 64 raisers sharing writes.
func BenchmarkRaiseDurableParallel64(b *testing.B) {
	s, err := openPins(b.TempDir(), "books", testID, newKey(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	var n atomic.Uint64
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.RaiseCounter("c", n.Add(1))
		}
	})
	b.ReportMetric(float64(s.Writes())/float64(b.N), "writes/op")
}

// BenchmarkRaiseMemory: without a state folder a raise costs a lock.
func BenchmarkRaiseMemory(b *testing.B) {
	s, err := openPins("", "books", testID, newKey(b))
	if err != nil {
		b.Fatal(err)
	}
	var n uint64
	for b.Loop() {
		n++
		s.RaiseCounter("c", n)
	}
}
