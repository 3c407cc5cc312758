package vault_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Two devices, each with its own store, converge through a hub: each
// works offline, and Sync carries the changes both ways.
func ExampleVault_Sync() {
	ctx := context.Background()
	hub := memstore.New()
	open := func(device stores.Store) *vault.Vault {
		v, err := vault.Open(ctx, vault.Config{
			Store: device, Hub: hub, Name: "books", User: "firm", Secret: []byte("firm-secret-2026"),
			// Cheap key derivation keeps the example fast; never do this in production.
			KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
		})
		if err != nil {
			log.Fatal(err)
		}
		return v
	}
	laptop, phone := open(memstore.New()), open(memstore.New())
	defer laptop.Close()
	defer phone.Close()

	if err := vault.CollectionOf[Customer](laptop, "customers").Put(ctx, "acme", Customer{Name: "ACME S.p.A."}); err != nil {
		log.Fatal(err)
	}
	if err := vault.CollectionOf[Customer](phone, "customers").Put(ctx, "bolt", Customer{Name: "Bolt S.r.l."}); err != nil {
		log.Fatal(err)
	}
	for _, v := range []*vault.Vault{laptop, phone, laptop} {
		rep, err := v.Sync(ctx)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("pulled %d, pushed %d\n", rep.Pulled, rep.Pushed)
	}
	c, err := vault.CollectionOf[Customer](laptop, "customers").Get(ctx, "bolt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Name)
	// Output:
	// pulled 0, pushed 1
	// pulled 1, pushed 1
	// pulled 1, pushed 0
	// Bolt S.r.l.
}

// A Syncer syncs in the background and reports how it went.
func ExampleVault_SyncEvery() {
	ctx := context.Background()
	v, err := vault.Open(ctx, vault.Config{
		Store: memstore.New(), Hub: memstore.New(), Name: "books", User: "firm", Secret: []byte("firm-secret-2026"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	s, err := v.SyncEvery(ctx, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if err := vault.CollectionOf[Customer](v, "customers").Put(ctx, "acme", Customer{Name: "ACME S.p.A."}); err != nil {
		log.Fatal(err)
	}
	// SyncNow syncs at once (a background sync may have pushed the record
	// already).
	if _, err := s.SyncNow(ctx); err != nil {
		log.Fatal(err)
	}
	st := s.Status()
	fmt.Println("error:", st.LastError, "running:", st.Running)
	s.Stop()
	fmt.Println("stopped:", s.Status().Stopped)
	// Output:
	// error: <nil> running: false
	// stopped: true
}

// Sale is a receipt numbered after the fact (the examples' deferred numbering).
type Sale struct {
	Number uint64
	Total  int
}

// Receipts written offline on two devices get gap-free numbers from one
// pass on the hub: SyncAndSettle pushes them, runs the pass there and pulls
// them back stamped.
func ExampleVault_SyncAndSettle() {
	ctx := context.Background()
	hub := memstore.New()
	open := func() (*vault.Vault, *vault.Numbered[Sale]) {
		v, err := vault.Open(ctx, vault.Config{
			Store: memstore.New(), Hub: hub, Name: "shop", User: "till", Secret: []byte("till-secret-2026"),
			KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
		})
		if err != nil {
			log.Fatal(err)
		}
		sales, err := vault.NumberingOf(vault.CollectionOf[Sale](v, "sales"), "sale", sequence.Options{},
			func(s *Sale, n sequence.Serial) { s.Number = n.N })
		if err != nil {
			log.Fatal(err)
		}
		return v, sales
	}
	till1, sales1 := open()
	till2, sales2 := open()
	defer till1.Close()
	defer till2.Close()

	// Written on each till: pending, with a provisional id (no hub needed).
	for i, sales := range []*vault.Numbered[Sale]{sales1, sales2, sales1} {
		r, err := sales.Put(ctx, fmt.Sprintf("sale-%d", i), Sale{Total: 10 * (i + 1)})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.ID, "pending:", r.Pending)
	}
	if _, err := till2.Sync(ctx); err != nil { // till 2's sale reaches the hub
		log.Fatal(err)
	}
	rep, err := till1.SyncAndSettle(ctx) // one pass numbers both tills' sales
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("numbered on the hub:", rep.Settled["sale"].Assigned)
	if _, err := till2.Sync(ctx); err != nil { // till 2 pulls the numbers
		log.Fatal(err)
	}
	for i := range 3 {
		r, err := sales2.Get(ctx, fmt.Sprintf("sale-%d", i))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.ID, "number", r.Value.Number, "total", r.Value.Total)
	}
	// Output:
	// sale-0 pending: true
	// sale-1 pending: true
	// sale-2 pending: true
	// numbered on the hub: 3
	// sale-0 number 1 total 10
	// sale-1 number 2 total 20
	// sale-2 number 3 total 30
}

// A Syncer with SettleNumbers numbers what each sync pushes, on the hub.
func ExampleSettleNumbers() {
	ctx := context.Background()
	v, err := vault.Open(ctx, vault.Config{
		Store: memstore.New(), Hub: memstore.New(), Name: "shop", User: "till", Secret: []byte("till-secret-2026"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	sales, err := vault.NumberingOf(vault.CollectionOf[Sale](v, "sales"), "sale", sequence.Options{},
		func(s *Sale, n sequence.Serial) { s.Number = n.N })
	if err != nil {
		log.Fatal(err)
	}
	if _, err := sales.Put(ctx, "sale-1", Sale{Total: 42}); err != nil {
		log.Fatal(err)
	}
	s, err := v.SyncEvery(ctx, time.Minute, vault.SettleNumbers())
	if err != nil {
		log.Fatal(err)
	}
	defer s.Stop()
	if _, err := s.SyncNow(ctx); err != nil {
		log.Fatal(err)
	}
	r, err := sales.Get(ctx, "sale-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.ID, "number", r.Value.Number, "pending:", r.Pending)
	// Output:
	// sale-1 number 1 pending: false
}
