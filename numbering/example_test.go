package numbering_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// Receipts written on a file store, where no number can be taken at write
// time, are handed off pending and numbered later by one pass.
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

	receipts, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipts",
		sequence.Options{Format: "R-{seq:05}"},
		func(r *Receipt, s sequence.Serial) { r.Number = s.Formatted })
	check(err)
	for _, id := range []string{"till-2/17", "till-1/40", "till-2/18"} {
		r, err := receipts.Put(ctx, id, Receipt{Total: 120}) // handed off: pending
		check(err)
		if !r.Pending {
			log.Fatalf("%s: numbered at write time on a file store", id)
		}
	}

	rep, err := receipts.Settle(ctx) // a pass, on the authority
	check(err)
	fmt.Printf("batch %d: numbers %d to %d\n", rep.Batch, rep.First, rep.Last)
	for _, id := range []string{"till-2/17", "till-1/40", "till-2/18"} {
		r, err := receipts.Get(ctx, id)
		check(err)
		fmt.Println(id, r.Value.Number)
	}
	a, ok, err := receipts.Series().Lookup(ctx, "till-1/40")
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
