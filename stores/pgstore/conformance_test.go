package pgstore_test

import (
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/stores/storetest"
)

// TestConformance runs the store contract suite, each subtest in a schema of
// its own. Commits do not wait for the WAL flush here: the suite checks
// atomicity and isolation, which are the same either way, and its 64-way
// compare-and-swap race is a chain of commits that would otherwise spend
// most of its time in fsync. Durability has TestServerRestart.
func TestConformance(t *testing.T) {
	dbURL := pgtest.AsyncCommit(pgtest.URL(t))
	storetest.Run(t, func(t *testing.T) stores.Store {
		return pgtest.OpenURL(t, dbURL, &pgstore.Options{MaxConns: 64})
	})
}

// BenchmarkStore is the suite's Put and Get benchmark, with durable commits.
func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) stores.Store {
		return pgtest.Open(b, &pgstore.Options{MaxConns: 64})
	})
}
