package noydb_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/memstore"
)

// memAndBadger are the stores the whole-SDK tests of trust and concurrency
// run on: in memory, and badger on disk.
func memAndBadger() map[string]func(testing.TB) stores.Store {
	return map[string]func(testing.TB) stores.Store{
		"memstore": func(testing.TB) stores.Store { return memstore.New() },
		"badgerstore": func(t testing.TB) stores.Store {
			st, err := badgerstore.Open(t.TempDir(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// adversaries are the same stores, each behind a faultstore.Adversary that
// can act behind the SDK's back.
func adversaries() map[string]func(t testing.TB) *faultstore.Adversary {
	out := map[string]func(t testing.TB) *faultstore.Adversary{}
	for name, newStore := range memAndBadger() {
		out[name] = func(t testing.TB) *faultstore.Adversary { return faultstore.NewAdversary(newStore(t)) }
	}
	return out
}
