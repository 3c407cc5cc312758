package noydb_test

import (
	"context"
	"fmt"
	"log"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// The README example: an encrypted collection and a gap-free, formatted series.
func Example() {
	ctx := context.Background()
	db, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("firm-secret-2026")})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	books, err := db.OpenVault(ctx, "books")
	if err != nil {
		log.Fatal(err)
	}
	invoices := vault.CollectionOf[Invoice](books, "invoices")
	seq, err := books.Sequence("fatture", sequence.Options{Partition: []any{2026}, Format: "{partition.0}/{seq:04}"})
	if err != nil {
		log.Fatal(err)
	}
	for _, customer := range []string{"Rossi", "Bianchi"} {
		inv, err := invoices.PutNumbered(ctx, "inv-"+customer, seq, func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted, Customer: customer, Total: 120}, nil
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(inv.Number, inv.Customer)
	}
	// Output:
	// 2026/0001 Rossi
	// 2026/0002 Bianchi
}
