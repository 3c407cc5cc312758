package noydb_test

import (
	"context"
	"fmt"
	"log"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A user who lost their secret opens a DB with a new one and recovers the
// vault with a recovery code; the DB's secret becomes the vault's.
func ExampleDB_RecoverVault() {
	ctx := context.Background()
	st := memstore.New()
	// Cheap key derivation keeps the example fast; never do this in production.
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	open := func(secret string) *noydb.DB {
		db, err := noydb.Open(ctx, noydb.Config{User: "olga", Secret: []byte(secret), Store: st, KDF: cheap, InsecureAllowWeakKDF: true})
		if err != nil {
			log.Fatal(err)
		}
		return db
	}
	db := open("forgotten")
	v, err := db.OpenVault(ctx, "books")
	if err != nil {
		log.Fatal(err)
	}
	codes, err := v.RecoveryCodes(ctx, 1)
	if err != nil {
		log.Fatal(err)
	}
	_ = db.Close()

	db = open("remembered")
	defer db.Close()
	if _, err := db.RecoverVault(ctx, "books", codes[0]); err != nil {
		log.Fatal(err)
	}
	fmt.Println("recovered")
	// Output: recovered
}

// ExampleDB_ChangeSecret changes the secret of one vault.
func ExampleDB_ChangeSecret() {
	ctx := context.Background()
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	db, err := noydb.Open(ctx, noydb.Config{User: "olga", Secret: []byte("old"), KDF: cheap, InsecureAllowWeakKDF: true})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.OpenVault(ctx, "books"); err != nil {
		log.Fatal(err)
	}
	err = db.ChangeSecret(ctx, "books", []byte("old"), []byte("new"))
	fmt.Println(err)
	// Output: <nil>
}
