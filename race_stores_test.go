package noydb_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
)

// raceStores lists the stores the whole-SDK tests run on. filestore is used
// through one handle, the only way its compare-and-swap is atomic.
func raceStores(t *testing.T) map[string]func(testing.TB) stores.Store {
	closeLater := func(t testing.TB, st stores.Store) stores.Store {
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	return map[string]func(testing.TB) stores.Store{
		"memstore": func(t testing.TB) stores.Store { return closeLater(t, memstore.New()) },
		"filestore": func(t testing.TB) stores.Store {
			st, err := filestore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			return closeLater(t, st)
		},
		// Skips without a PostgreSQL server, except in CI (scripts/test starts one).
		"pgstore": func(t testing.TB) stores.Store { return pgtest.Open(t, nil) },
		"badgerstore": func(t testing.TB) stores.Store {
			st, err := badgerstore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			return closeLater(t, st)
		},
	}
}
