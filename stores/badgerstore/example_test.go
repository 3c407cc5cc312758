package badgerstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "badgerstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := badgerstore.Open(dir, nil) // durable: fsync on every commit
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	ctx := context.Background()
	if _, err := st.Put(ctx, "accounts/a", []byte("100")); err != nil {
		log.Fatal(err)
	}
	// Move everything from a to b in one atomic transaction.
	err = st.Update(ctx, func(tx stores.Tx) error {
		a, err := tx.Get("accounts/a")
		if err != nil {
			return err
		}
		if err := tx.Put("accounts/b", a.Value); err != nil {
			return err
		}
		return tx.Put("accounts/a", []byte("0"))
	})
	if err != nil {
		log.Fatal(err)
	}
	for it, err := range st.List(ctx, "accounts/") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s = %s\n", it.Key, it.Value)
	}
	// Output:
	// accounts/a = 0
	// accounts/b = 100
}
