package vault_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// openExample opens a vault in memory with a cheap key derivation, which
// keeps the examples fast; never do this in production.
func openExample(ctx context.Context) *vault.Vault {
	v, err := vault.Open(ctx, vault.Config{
		Store: memstore.New(), Name: "books", User: "firm", Secret: []byte("s"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	return v
}

type Account struct {
	Owner   string
	Balance int
}

// Update changes a record in place: concurrent Updates of one record never
// lose each other's changes.
func ExampleCollection_Update() {
	ctx := context.Background()
	v := openExample(ctx)
	accounts := vault.CollectionOf[Account](v, "accounts")
	if err := accounts.Put(ctx, "acme", Account{Owner: "ACME", Balance: 100}); err != nil {
		log.Fatal(err)
	}
	r, err := accounts.Update(ctx, "acme", func(a *Account) error {
		if a.Balance < 30 {
			return errors.New("insufficient funds") // returned as is; nothing written
		}
		a.Balance -= 30
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Value.Balance, r.Revision)
	// Output: 70 2
}

// GetRecord returns the revision with the value, for a conditional write:
// PutIf succeeds only if nobody wrote the record since it was read.
func ExampleCollection_GetRecord() {
	ctx := context.Background()
	v := openExample(ctx)
	accounts := vault.CollectionOf[Account](v, "accounts")
	if err := accounts.Put(ctx, "acme", Account{Owner: "ACME", Balance: 100}); err != nil {
		log.Fatal(err)
	}
	r, err := accounts.GetRecord(ctx, "acme")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Value.Balance, r.Revision, r.Author)

	r.Value.Balance += 5
	fmt.Println(accounts.PutIf(ctx, "acme", r.Value, r.Revision))
	err = accounts.PutIf(ctx, "acme", r.Value, r.Revision) // revision 1 is stale now
	var conflict *vault.ConflictError
	if errors.As(err, &conflict) {
		fmt.Println("conflict: want", conflict.Want, "got", conflict.Got)
	}
	// Output:
	// 100 1 firm
	// <nil>
	// conflict: want 1 got 2
}

type Invoice struct {
	Number   string
	Customer string
	Total    int
}

// A transaction numbers an invoice, stores it and updates its customer in
// one commit: if any step fails, nothing is written and no number is taken.
func ExampleVault_Update() {
	ctx := context.Background()
	v := openExample(ctx)
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	accounts := vault.CollectionOf[Account](v, "accounts")
	seq, err := v.Sequence("invoices", sequence.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := accounts.Put(ctx, "acme", Account{Owner: "ACME"}); err != nil {
		log.Fatal(err)
	}
	bill := func(id string, total int) error {
		return v.Update(ctx, func(tx *vault.Tx) error {
			s, err := tx.Next(seq)
			if err != nil {
				return err
			}
			if err := invoices.In(tx).Put(id, Invoice{Number: s.Formatted, Customer: "acme", Total: total}); err != nil {
				return err
			}
			a, err := accounts.In(tx).Get("acme")
			if err != nil {
				return err
			}
			if total <= 0 {
				return errors.New("an invoice needs a positive total")
			}
			a.Balance += total
			return accounts.In(tx).Put("acme", a)
		})
	}
	fmt.Println(bill("inv-a", 120))
	fmt.Println(bill("inv-b", -5))
	fmt.Println(bill("inv-c", 80))

	c, err := invoices.Get(ctx, "inv-c")
	if err != nil {
		log.Fatal(err)
	}
	a, err := accounts.Get(ctx, "acme")
	if err != nil {
		log.Fatal(err)
	}
	_, err = invoices.Get(ctx, "inv-b")
	fmt.Println(c.Number, a.Balance, errors.Is(err, vault.ErrNotFound))
	// Output:
	// <nil>
	// an invoice needs a positive total
	// <nil>
	// 2 200 true
}
