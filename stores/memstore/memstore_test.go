package memstore_test

import (
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) stores.Store { return memstore.New() })
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(*testing.B) stores.Store { return memstore.New() })
}

// TestConformanceWithKeysSharingHashes: the whole contract holds when
// keys share their hashes (here every key one of three), as a few do
// with the store's 64-bit hash: reads, writes, compare-and-swap,
// transactions, deletes and listings find each key on its own.
func TestConformanceWithKeysSharingHashes(t *testing.T) {
	storetest.Run(t, func(*testing.T) stores.Store {
		return memstore.NewWithHash(func(k string) uint64 { return uint64(len(k) % 3) })
	})
}
