package main

import (
	"context"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
)

func init() {
	storeOpeners["postgres"] = func(ctx context.Context, spec storeSpec) (stores.Store, error) {
		return pgstore.Open(ctx, spec.conn, &pgstore.Options{Schema: spec.schema})
	}
}
