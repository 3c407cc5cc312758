package numbering_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// Receipts written on a file store, where no number can be taken at write
// time, are enqueued and numbered later by one pass.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "noydb-numbering-example-")
	check(err)
	defer os.RemoveAll(dir)
	st, err := filestore.Open(dir, nil)
	check(err)
	defer st.Close()
	db, err := noydb.Open(ctx, noydb.Config{User: "shop", Secret: []byte("shop-secret-2026"), Store: st})
	check(err)
	defer db.Close()
	v, err := db.OpenVault(ctx, "shop")
	check(err)

	receipts := vault.CollectionOf[Receipt](v, "receipts")
	series, err := v.Numbering("receipts", numbering.Options{
		Collection: "receipts", Field: "Number", Format: "R-{seq:05}",
	})
	check(err)
	for _, id := range []string{"till-2/17", "till-1/40", "till-2/18"} {
		check(receipts.Put(ctx, id, Receipt{Total: 120}))
		_, err := series.Enqueue(ctx, id)
		check(err)
	}

	rep, err := series.RunPass(ctx) // on the authority
	check(err)
	fmt.Printf("batch %d: numbers %d to %d\n", rep.Batch, rep.First, rep.Last)
	for _, id := range []string{"till-2/17", "till-1/40", "till-2/18"} {
		r, err := receipts.Get(ctx, id)
		check(err)
		fmt.Println(id, r.Number)
	}
	a, ok, err := series.Lookup(ctx, "till-1/40")
	check(err)
	fmt.Println("lookup till-1/40:", ok, a.Number, a.Formatted)
	// Output:
	// batch 1: numbers 1 to 3
	// till-2/17 R-00001
	// till-1/40 R-00002
	// till-2/18 R-00003
	// lookup till-1/40: true 2 R-00002
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
