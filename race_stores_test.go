package noydb_test

import (
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// raceStores lists the stores the first-open race runs on.
func raceStores(t *testing.T) map[string]func(testing.TB) stores.Store {
	return map[string]func(testing.TB) stores.Store{
		"memstore": func(t testing.TB) stores.Store {
			st := memstore.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}
