package vault_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Receipt is a record that carries its number in Number.
type Receipt struct {
	Number string
	Total  int
}

// sellTwo is the application's code: the same on every store.
func sellTwo(ctx context.Context, st stores.Store) {
	v, err := vault.Open(ctx, vault.Config{
		Store: st, Name: "shop", User: "till", Secret: []byte("shop-secret-2026"),
		// Cheap key derivation keeps the example fast; never do this in production.
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	// Said once: how a number goes into a Receipt, and the series' format.
	receipts, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipts",
		sequence.Options{Format: "R-{seq:05}"},
		func(r *Receipt, s sequence.Serial) { r.Number = s.Formatted })
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"r-1", "r-2"} {
		r, err := receipts.Put(ctx, id, Receipt{Total: 120})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: pending %t, number %q\n", id, r.Pending, r.Value.Number)
	}
	if _, err := receipts.Settle(ctx); err != nil { // on one authority; nothing to do online
		log.Fatal(err)
	}
	r, err := receipts.Get(ctx, "r-2")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("r-2 after the pass: %s\n", r.Value.Number)
}

// One handle numbers records on every store: in the commit that writes
// them where the store has atomic compare-and-swap (memory), by a pass
// where it has not (a folder of files).
func ExampleNumberingOf() {
	ctx := context.Background()
	fmt.Println("in memory:")
	sellTwo(ctx, memstore.New())

	dir, err := os.MkdirTemp("", "noydb-numbered-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := filestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	fmt.Println("in a folder:")
	sellTwo(ctx, st)
	// Output:
	// in memory:
	// r-1: pending false, number "R-00001"
	// r-2: pending false, number "R-00002"
	// r-2 after the pass: R-00002
	// in a folder:
	// r-1: pending true, number ""
	// r-2: pending true, number ""
	// r-2 after the pass: R-00002
}
