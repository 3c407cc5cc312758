package vault_test

import (
	"context"
	"fmt"
	"log"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// openDevice opens the vault "shop" on a device's store, synced through hub.
func openDevice(ctx context.Context, device, hub stores.Store) *vault.Vault {
	v, err := vault.Open(ctx, vault.Config{
		Store: device, Hub: hub, Name: "shop", User: "till", Secret: []byte("shop-secret-2026"),
		// Cheap key derivation keeps the example fast; never do this in production.
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	return v
}

// Two devices take invoice numbers from the counters on their hub: one
// series, gap-free across both. PutNumbered commits the invoice with its
// number on the hub and copies it to the device, which reads it at once.
func ExampleConfig_hub() {
	ctx := context.Background()
	hub := memstore.New() // PostgreSQL (pgstore) for a fleet
	a := openDevice(ctx, memstore.New(), hub)
	defer a.Close()
	b := openDevice(ctx, memstore.New(), hub)
	defer b.Close()

	for i, v := range []*vault.Vault{a, b, a} {
		seq, err := v.Sequence("invoices", sequence.Options{Format: "INV-{seq:04}"})
		if err != nil {
			log.Fatal(err)
		}
		invoices := vault.CollectionOf[Invoice](v, "invoices")
		id := fmt.Sprintf("sale-%d", i+1)
		_, err = invoices.PutNumbered(ctx, id, seq, func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted, Customer: "ACME"}, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		got, err := invoices.Get(ctx, id) // from the device's own store
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s on device %c: %s\n", id, "aba"[i], got.Number)
	}
	// Output:
	// sale-1 on device a: INV-0001
	// sale-2 on device b: INV-0002
	// sale-3 on device a: INV-0003
}
