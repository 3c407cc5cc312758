// Command 110-offline-receipts shows one numbering handle on every store:
// two tills write receipts through vault.NumberingOf into one shared folder
// (a file store, as a synced folder would be), where no number can be taken
// at write time, so each receipt is handed off pending; an authority later
// numbers them all in one pass, gap-free and in the order they were
// written. The very same sell function, run on a store with atomic
// compare-and-swap, numbers each receipt at once.
//
// It prints why a till cannot take a bare number itself, each receipt with
// its provisional id as the tills write it, the pass's report, the numbered
// receipts, a late receipt numbered by a second pass and looked up by its
// provisional id, the series' audit and the ledger's verdict, and finally
// the same sales on an online store.
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
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Receipt is one sale. Number is set through the handle's setter: at once
// online, by the authority's pass offline.
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

// node is one DB instance on its own store handle: a till or the authority.
type node struct {
	name     string
	db       *noydb.DB
	store    stores.Store
	vault    *vault.Vault
	receipts *vault.Numbered[Receipt]
}

func open(ctx context.Context, st stores.Store, name string) (*node, error) {
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
	// Said once: how a number goes into a Receipt, and its format (stored
	// with the series, so every till and the office number alike).
	receipts, err := vault.NumberingOf(vault.CollectionOf[Receipt](v, "receipts"), "receipts",
		sequence.Options{Format: "R-{seq:05}"},
		func(r *Receipt, s sequence.Serial) { r.Number = s.Formatted })
	if err != nil {
		db.Close()
		st.Close()
		return nil, err
	}
	return &node{name: name, db: db, store: st, vault: v, receipts: receipts}, nil
}

func openFolder(ctx context.Context, dir, name string) (*node, error) {
	st, err := filestore.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	return open(ctx, st, name)
}

func (n *node) close() {
	n.db.Close()
	n.store.Close()
}

// sell writes a receipt through the numbering handle: the same code on
// every store. It returns the receipt's provisional id when it is pending.
func (n *node) sell(ctx context.Context, id, item string, total int) (string, error) {
	r, err := n.receipts.Put(ctx, id, Receipt{Till: n.name, Item: item, Total: total})
	if err != nil {
		return "", err
	}
	if r.Pending {
		fmt.Printf("  %-6s %-8s %-14s %6.2f  pending, provisional %s…\n", n.name, id, item, float64(total)/100, r.Provisional[:18])
		return r.Provisional, nil
	}
	fmt.Printf("  %-6s %-8s %-14s %6.2f  numbered %s\n", n.name, id, item, float64(total)/100, r.Value.Number)
	return "", nil
}

func run(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "noydb-offline-receipts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The authority opens first and so creates the vault in the folder.
	office, err := openFolder(ctx, dir, "office")
	if err != nil {
		return err
	}
	defer office.close()
	till1, err := openFolder(ctx, dir, "till-1")
	if err != nil {
		return err
	}
	defer till1.close()
	till2, err := openFolder(ctx, dir, "till-2")
	if err != nil {
		return err
	}
	defer till2.close()

	seq, err := till1.vault.Sequence("receipts", sequence.Options{})
	if err != nil {
		return err
	}
	if _, err := seq.Next(ctx); errors.Is(err, sequence.ErrOffline) {
		fmt.Println("a till cannot take a bare number on the shared folder:")
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
		if _, err := s.till.sell(ctx, s.id, s.item, s.total); err != nil {
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
	late, err := till2.sell(ctx, "t2-0004", "muffin", 280)
	if err != nil {
		return err
	}
	if err := pass(ctx, office); err != nil {
		return err
	}
	a, ok, err := till2.receipts.Lookup(ctx, late)
	if err != nil {
		return err
	}
	fmt.Printf("  till-2 looks up its provisional id: %s numbered %t, %s\n", a.RecordID, ok, a.Formatted)

	audit, err := office.receipts.Audit(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("\naudit of the series: %d numbered, clean: %t\n", audit.Numbered(), audit.Clean())

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
	fmt.Printf("ledger: %d entries, intact: %t, %d number-assigned\n", rep.Entries, rep.OK(), assigned)

	fmt.Println("\nthe same sell, on a store with atomic compare-and-swap:")
	online, err := open(ctx, memstore.New(), "till-3")
	if err != nil {
		return err
	}
	defer online.close()
	for i, item := range []string{"espresso", "bagel"} {
		if _, err := online.sell(ctx, fmt.Sprintf("t3-%04d", i+1), item, 150); err != nil {
			return err
		}
	}
	return nil
}

func pass(ctx context.Context, n *node) error {
	rep, err := n.receipts.Settle(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("  batch %d: numbers %d to %d, %d receipts stamped\n", rep.Batch, rep.First, rep.Last, rep.Assigned)
	return nil
}

func printReceipts(ctx context.Context, n *node) error {
	var all []Receipt
	for r, err := range vault.CollectionOf[Receipt](n.vault, "receipts").List(ctx) {
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
