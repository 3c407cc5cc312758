package ledger_test

import (
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// Badger joins the stores every behaviour is checked on (in memory), and
// the crash test (on disk, durable).
func init() {
	storeKinds = append(storeKinds, struct {
		name string
		make func() stores.Store
	}{"badger", func() stores.Store {
		st, err := badgerstore.Open("", &badgerstore.Options{InMemory: true})
		if err != nil {
			panic(err)
		}
		return st
	}})
	crashStores["badgerstore"] = func(dir string) (stores.Store, error) { return badgerstore.Open(dir, nil) }
}
