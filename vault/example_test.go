package vault_test

import (
	"context"
	"fmt"
	"log"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

type Customer struct {
	Name string
	VAT  string
}

// Records are sealed before the store sees them and decrypted on Get.
func ExampleCollectionOf() {
	ctx := context.Background()
	v, err := vault.Open(ctx, vault.Config{
		Store: memstore.New(), Name: "books", User: "firm", Secret: []byte("firm-secret-2026"),
		// Cheap key derivation keeps the example fast; never do this in production.
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	customers := vault.CollectionOf[Customer](v, "customers")
	if err := customers.Put(ctx, "acme", Customer{Name: "ACME S.p.A.", VAT: "IT01234567890"}); err != nil {
		log.Fatal(err)
	}
	c, err := customers.Get(ctx, "acme")
	if err != nil {
		log.Fatal(err)
	}
	n, err := customers.Count(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Name, n)
	// Output: ACME S.p.A. 1
}

// Every change is in the vault's audit ledger, which Verify checks end to
// end; an application adds its own events with Record, which read back as
// entries of kind ledger.AppEvent.
func ExampleVault_Audit() {
	ctx := context.Background()
	v, err := vault.Open(ctx, vault.Config{
		Store: memstore.New(), Name: "books", User: "firm", Secret: []byte("s"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	customers := vault.CollectionOf[Customer](v, "customers")
	_ = customers.Put(ctx, "acme", Customer{Name: "ACME"})
	if _, err := v.Record(ctx, "exported", []byte("customers.csv")); err != nil {
		log.Fatal(err)
	}
	_ = customers.Delete(ctx, "acme")

	for e, err := range v.Audit().Read(ctx, 1) {
		if err != nil {
			log.Fatal(err)
		}
		if name, data, ok := e.Event(); ok {
			fmt.Println(e.Seq, e.Kind, name, string(data), "by", e.Actor)
			continue
		}
		fmt.Println(e.Seq, e.Kind, e.Collection+"/"+e.ID, "by", e.Actor)
	}
	rep, err := v.Audit().Verify(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rep.Entries, rep.OK())
	// Output:
	// 1 record-put customers/acme by firm
	// 2 app-event exported customers.csv by firm
	// 3 record-delete customers/acme by firm
	// 3 true
}
