package noydb_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/noydb-go/noydb/vault"
)

// BenchmarkPut1KiBAfterRotation is BenchmarkPut1KiB on a vault that was
// rotated once: every record commit reads the store's current generation.
func BenchmarkPut1KiBAfterRotation(b *testing.B) {
	for name, newStore := range benchStores() {
		if name == "filestore" {
			continue // no transactions: no rotation
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			v := benchVault(b, newStore(b))
			rot, err := v.RotateKeys(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := rot.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			c := vault.CollectionOf[Invoice](v, "invoices")
			rec := Invoice{Notes: strings.Repeat("x", 1024)}
			i := 0
			for b.Loop() {
				i++
				if err := c.Put(ctx, fmt.Sprint(i%1000), rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
