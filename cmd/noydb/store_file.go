package main

import (
	"context"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
)

func init() {
	storeOpeners["file"] = func(_ context.Context, spec storeSpec) (stores.Store, error) {
		return filestore.Open(spec.dir, nil)
	}
}
