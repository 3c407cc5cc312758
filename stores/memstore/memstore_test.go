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
