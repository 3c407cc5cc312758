// Command 110-offline-receipts shows deferred numbering: two tills write
// receipts into one shared folder (a file store, as a synced folder would
// be) without taking numbers, and an authority later numbers them all in one
// pass, gap-free and in the order they were written.
//
// It prints why a till cannot take a number itself (the file store has no
// atomic compare-and-swap), each receipt with its provisional id as the
// tills write it, the pass's report, the numbered receipts, a late receipt
// numbered by a second pass, and the ledger's verdict.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// Receipt is one sale. Number is empty until the authority's pass sets it.
type Receipt struct {
	Number string
	Till   string
	Item   string
	Total  int // cents
}

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "110-offline-receipts:", err)
		os.Exit(1)
	}
}

// node is one DB instance on its own handle of the shared folder: a till or
// the authority.
type node struct {
	name     string
	db       *noydb.DB
	store    *filestore.Store
	receipts *vault.Collection[Receipt]
	series   *numbering.Series
	vault    *vault.Vault
}

func open(ctx context.Context, dir, name string) (*node, error) {
	st, err := filestore.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	db, err := noydb.Open(ctx, noydb.Config{User: "shop", Secret: []byte("shop-secret-2026"), Store: st})
	if err != nil {
		st.Close()
		return nil, err
	}
	v, err := db.OpenVault(ctx, "shop")
	if err != nil {
		db.Close()
		st.Close()
		return nil, err
	}
	series, err := v.Numbering("receipts", numbering.Options{
		Collection: "receipts",
		Field:      "Number",
		Format:     "R-{seq:05}",
	})
	if err != nil {
		db.Close()
		st.Close()
		return nil, err
	}
	return &node{name: name, db: db, store: st, vault: v,
		receipts: vault.CollectionOf[Receipt](v, "receipts"), series: series}, nil
}

func (n *node) close() {
	n.db.Close()
	n.store.Close()
}

// sell writes a receipt without a number and puts it in line for one.
func (n *node) sell(ctx context.Context, id, item string, total int) error {
	if err := n.receipts.Put(ctx, id, Receipt{Till: n.name, Item: item, Total: total}); err != nil {
		return err
	}
	p, err := n.series.Enqueue(ctx, id)
	if err != nil {
		return err
	}
	fmt.Printf("  %-6s %-8s %-14s %6.2f  provisional %s…\n", n.name, id, item, float64(total)/100, p[:18])
	return nil
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "noydb-offline-receipts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The authority opens first and so creates the vault in the folder.
	office, err := open(ctx, dir, "office")
	if err != nil {
		return err
	}
	defer office.close()
	till1, err := open(ctx, dir, "till-1")
	if err != nil {
		return err
	}
	defer till1.close()
	till2, err := open(ctx, dir, "till-2")
	if err != nil {
		return err
	}
	defer till2.close()

	seq, err := till1.vault.Sequence("receipts", sequence.Options{})
	if err != nil {
		return err
	}
	if _, err := seq.Next(ctx); errors.Is(err, sequence.ErrOffline) {
		fmt.Println("a till cannot take a number on the shared folder:")
		fmt.Println(" ", err)
	}

	fmt.Println("\nthe tills sell, offline:")
	sales := []struct {
		till  *node
		id    string
		item  string
		total int
	}{
		{till1, "t1-0001", "espresso", 120},
		{till2, "t2-0001", "croissant", 150},
		{till1, "t1-0002", "cappuccino", 180},
		{till2, "t2-0002", "orange juice", 350},
		{till2, "t2-0003", "espresso", 120},
		{till1, "t1-0003", "tea", 200},
	}
	for _, s := range sales {
		if err := s.till.sell(ctx, s.id, s.item, s.total); err != nil {
			return err
		}
	}

	fmt.Println("\nthe office runs a pass:")
	if err := pass(ctx, office); err != nil {
		return err
	}
	if err := printReceipts(ctx, office); err != nil {
		return err
	}

	fmt.Println("\na late sale, then another pass:")
	if err := till2.sell(ctx, "t2-0004", "muffin", 280); err != nil {
		return err
	}
	if err := pass(ctx, office); err != nil {
		return err
	}
	a, ok, err := till2.series.Lookup(ctx, "t2-0004")
	if err != nil {
		return err
	}
	fmt.Printf("  till-2 looks up t2-0004: numbered %t, %s\n", ok, a.Formatted)

	rep, err := office.vault.Audit().Verify(ctx)
	if err != nil {
		return err
	}
	assigned := 0
	for e, err := range office.vault.Audit().Read(ctx, 1) {
		if err != nil {
			return err
		}
		if e.Kind == ledger.NumberAssigned {
			assigned++
		}
	}
	fmt.Printf("\nledger: %d entries, intact: %t, %d number-assigned\n", rep.Entries, rep.OK(), assigned)
	return nil
}

func pass(ctx context.Context, n *node) error {
	rep, err := n.series.RunPass(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  batch %d: numbers %d to %d, %d receipts stamped\n", rep.Batch, rep.First, rep.Last, rep.Assigned)
	return nil
}

func printReceipts(ctx context.Context, n *node) error {
	var all []Receipt
	for r, err := range n.receipts.List(ctx) {
		if err != nil {
			return err
		}
		all = append(all, r.Value)
	}
	slices.SortFunc(all, func(a, b Receipt) int { return strings.Compare(a.Number, b.Number) })
	for _, r := range all {
		fmt.Printf("  %s  %-6s %-14s %6.2f\n", r.Number, r.Till, r.Item, float64(r.Total)/100)
	}
	return nil
}
