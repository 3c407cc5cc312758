package main

import (
	"context"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

func init() {
	storeOpeners["badger"] = func(_ context.Context, spec storeSpec) (stores.Store, error) {
		return badgerstore.Open(spec.dir, nil)
	}
}
