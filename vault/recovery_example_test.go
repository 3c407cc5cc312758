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

// A person issues recovery codes for themselves; after losing their secret
// they open once with a code and a new secret; the code is then used up.
func ExampleVault_RecoveryCodes() {
	ctx := context.Background()
	// Cheap key derivation keeps the example fast; never do this in production.
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	st := memstore.New()
	cfg := vault.Config{Store: st, Name: "books", User: "olga", Secret: []byte("lost soon"), KDF: cheap, InsecureAllowWeakKDF: true}
	v, err := vault.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	codes, err := v.RecoveryCodes(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	_ = v.Close()
	// Show the codes to the person once (never log them); here, their form.
	fmt.Println(len(codes), "codes like", len(codes[0]), "characters")

	rec := cfg
	rec.Secret, rec.RecoveryCode, rec.NewSecret = nil, codes[0], []byte("new secret")
	v, err = vault.Open(ctx, rec)
	if err != nil {
		log.Fatal(err)
	}
	_ = v.Close()

	_, err = vault.Open(ctx, rec)
	fmt.Println("again:", errors.Is(err, vault.ErrRecoveryCodeUsed))
	_, err = vault.Open(ctx, cfg)
	fmt.Println("old secret:", errors.Is(err, vault.ErrWrongSecret))
	rec.RecoveryCode = "K7QF-3M9X" // mistyped: caught before any key work
	_, err = vault.Open(ctx, rec)
	fmt.Println("typo:", errors.Is(err, vault.ErrBadRecoveryCode))
	// Output:
	// 2 codes like 34 characters
	// again: true
	// old secret: true
	// typo: true
}
