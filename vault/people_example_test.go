package vault_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// An owner grants a reader with a secret and a writer with a public key
// (the writer keeps the private key); each opens with what they hold, and
// the reader cannot write.
func ExampleVault_Grant() {
	ctx := context.Background()
	// Cheap key derivation keeps the example fast; never do this in production.
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	st := memstore.New()
	cfg := func(user string) vault.Config {
		return vault.Config{Store: st, Name: "books", User: user, KDF: cheap, InsecureAllowWeakKDF: true}
	}
	ownerCfg := cfg("olga")
	ownerCfg.Secret = []byte("olga's secret")
	owner, err := vault.Open(ctx, ownerCfg)
	if err != nil {
		log.Fatal(err)
	}
	defer owner.Close()

	// The writer makes a key pair and gives the owner its public key only.
	id, err := crypto.GenerateIdentity()
	if err != nil {
		log.Fatal(err)
	}
	pub, err := id.PublicKey()
	if err != nil {
		log.Fatal(err)
	}
	if err := owner.Grant(ctx, "wim", vault.PublicKey(pub), vault.RoleWriter); err != nil {
		log.Fatal(err)
	}
	if err := owner.Grant(ctx, "rita", vault.Secret([]byte("rita's secret")), vault.RoleReader); err != nil {
		log.Fatal(err)
	}

	wimCfg := cfg("wim")
	wimCfg.Identity = id
	wim, err := vault.Open(ctx, wimCfg)
	if err != nil {
		log.Fatal(err)
	}
	defer wim.Close()
	fmt.Println(vault.CollectionOf[Customer](wim, "customers").Put(ctx, "acme", Customer{Name: "ACME"}))

	ritaCfg := cfg("rita")
	ritaCfg.Secret = []byte("rita's secret")
	rita, err := vault.Open(ctx, ritaCfg)
	if err != nil {
		log.Fatal(err)
	}
	defer rita.Close()
	err = vault.CollectionOf[Customer](rita, "customers").Put(ctx, "acme", Customer{Name: "no"})
	fmt.Println(errors.Is(err, vault.ErrNotPermitted))
	// Output:
	// <nil>
	// true
}

// People lists who has access, with their roles and who granted them.
func ExampleVault_People() {
	ctx := context.Background()
	v, err := vault.Open(ctx, vault.Config{
		Store: memstore.New(), Name: "books", User: "olga", Secret: []byte("olga's secret"),
		// Cheap key derivation keeps the example fast; never do this in production.
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	if err := v.Grant(ctx, "rita", vault.Secret([]byte("rita's secret")), vault.RoleReader); err != nil {
		log.Fatal(err)
	}
	if err := v.Grant(ctx, "wanda", vault.Secret([]byte("wanda's secret")), vault.RoleWriter); err != nil {
		log.Fatal(err)
	}
	if err := v.Revoke(ctx, "wanda"); err != nil {
		log.Fatal(err)
	}
	people, err := v.People(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range people {
		fmt.Println(p.Name, p.Role, "granted by", p.GrantedBy, "revoked:", p.Revoked)
	}
	// Output:
	// olga owner granted by olga revoked: false
	// rita reader granted by olga revoked: false
	// wanda writer granted by olga revoked: true
}

// A writer limited to one collection reads and writes it, and every call
// on another collection is refused; SetCollections gives her another.
func ExampleVault_Grant_collections() {
	ctx := context.Background()
	// Cheap key derivation keeps the example fast; never do this in production.
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	st := memstore.New()
	cfg := func(user, secret string) vault.Config {
		return vault.Config{Store: st, Name: "books", User: user, Secret: []byte(secret), KDF: cheap, InsecureAllowWeakKDF: true}
	}
	owner, err := vault.Open(ctx, cfg("olga", "olga's secret"))
	if err != nil {
		log.Fatal(err)
	}
	defer owner.Close()
	if err := vault.CollectionOf[Customer](owner, "payroll").Put(ctx, "olga", Customer{Name: "salary"}); err != nil {
		log.Fatal(err)
	}
	// The grant rotates the keys and returns once every record is
	// re-sealed: lena holds no key that opens payroll.
	if err := owner.Grant(ctx, "lena", vault.Secret([]byte("lena's secret")), vault.RoleWriter, "customers"); err != nil {
		log.Fatal(err)
	}

	lena, err := vault.Open(ctx, cfg("lena", "lena's secret"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(vault.CollectionOf[Customer](lena, "customers").Put(ctx, "acme", Customer{Name: "ACME"}))
	_, err = vault.CollectionOf[Customer](lena, "payroll").Get(ctx, "olga")
	fmt.Println(errors.Is(err, vault.ErrNotPermitted))
	lena.Close()

	if err := owner.SetCollections(ctx, "lena", "customers", "orders"); err != nil {
		log.Fatal(err)
	}
	people, err := owner.People(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range people {
		fmt.Println(p.Name, p.Role, p.Collections)
	}
	// Output:
	// <nil>
	// true
	// lena writer [customers orders]
	// olga owner []
}
