package main

import (
	"context"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

func init() {
	storeOpeners["badger"] = func(_ context.Context, spec storeSpec) (stores.Store, error) {
		if spec.readOnly {
			st, err := badgerstore.Open(spec.dir, &badgerstore.Options{ReadOnly: true, ShortLived: spec.shortLived})
			if !writerNeeded(err) {
				return st, err
			}
		}
		return badgerstore.Open(spec.dir, &badgerstore.Options{ShortLived: spec.shortLived})
	}
}

// writerNeeded tells whether a read-only open failed in a way only a
// read-write open gets past: a crash left writes only a writer recovers, or
// badger has no read-only mode on this system (Windows, Plan 9), where
// every read command would fail otherwise.
func writerNeeded(err error) bool {
	return errors.Is(err, badgerstore.ErrRecoveryNeeded) ||
		errors.Is(err, badger.ErrWindowsNotSupported) ||
		errors.Is(err, badger.ErrPlan9NotSupported)
}
