package main

import (
	"context"
	"errors"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

func init() {
	storeOpeners["badger"] = func(_ context.Context, spec storeSpec) (stores.Store, error) {
		if spec.readOnly {
			st, err := badgerstore.Open(spec.dir, &badgerstore.Options{ReadOnly: true})
			if !errors.Is(err, badgerstore.ErrRecoveryNeeded) {
				return st, err
			}
			// A crash left writes only a writer recovers: open it as one.
		}
		return badgerstore.Open(spec.dir, nil)
	}
}
