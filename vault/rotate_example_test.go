package vault_test

import (
	"context"
	"fmt"
	"log"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// An owner rotates the vault's keys: new records use the new generation
// at once, the older ones are re-sealed in the background while they stay
// readable, and the app follows the progress.
func ExampleVault_RotateKeys() {
	ctx := context.Background()
	// Cheap key derivation keeps the example fast; never do this in production.
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	v, err := vault.Open(ctx, vault.Config{Store: memstore.New(), Name: "books", User: "olga",
		Secret: []byte("olga's secret"), KDF: cheap, InsecureAllowWeakKDF: true})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	notes := vault.CollectionOf[string](v, "notes")
	for _, id := range []string{"a", "b", "c"} {
		if err := notes.Put(ctx, id, "note "+id); err != nil {
			log.Fatal(err)
		}
	}

	rot, err := v.RotateKeys(ctx, vault.WithRotationProgress(func(p vault.RotationProgress) {
		// Called every 200 ms and at the end: draw a progress bar here.
		_ = p.Done
	}))
	if err != nil {
		log.Fatal(err)
	}
	b, err := notes.Get(ctx, "b") // reads work while records are re-sealed
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b)
	if err := rot.Wait(ctx); err != nil {
		log.Fatal(err) // ResumeRotation continues after a crash or Close
	}
	p := rot.Progress()
	fmt.Printf("generation %d: %d of %d re-sealed, finished: %v\n", p.Generation, p.Done, p.Total, p.Finished)
	// Output:
	// note b
	// generation 2: 3 of 3 re-sealed, finished: true
}

// A store puts carl's keyring entry back as it was before his revocation:
// the next rotation gives it no key and says so.
func ExampleRotation_Skipped() {
	ctx := context.Background()
	// Cheap key derivation keeps the example fast; never do this in production.
	cheap := crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}
	st := memstore.New()
	v, err := vault.Open(ctx, vault.Config{Store: st, Name: "books", User: "olga",
		Secret: []byte("olga's secret"), KDF: cheap, InsecureAllowWeakKDF: true})
	if err != nil {
		log.Fatal(err)
	}
	defer v.Close()
	if err := v.Grant(ctx, "carl", vault.Secret([]byte("carl's secret")), vault.RoleWriter); err != nil {
		log.Fatal(err)
	}
	before, err := st.Get(ctx, "v/books/_keyring/carl")
	if err != nil {
		log.Fatal(err)
	}
	if err := v.Revoke(ctx, "carl"); err != nil {
		log.Fatal(err)
	}
	if err := v.Rotation().Wait(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := st.Put(ctx, "v/books/_keyring/carl", before.Value); err != nil {
		log.Fatal(err)
	}

	rot, err := v.RotateKeys(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := rot.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("given no new key:", rot.Skipped())
	// Output:
	// given no new key: [carl]
}
