package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "filestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := filestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	ctx := context.Background()
	v1, err := st.Put(ctx, "invoices/2026-0001", []byte("sealed record"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.CompareAndSwap(ctx, "invoices/2026-0001", v1, []byte("sealed record, v2")); err != nil {
		log.Fatal(err)
	}
	// v1 is stale now.
	_, err = st.CompareAndSwap(ctx, "invoices/2026-0001", v1, []byte("lost"))
	fmt.Println("stale compare-and-swap conflicts:", errors.Is(err, stores.ErrConflict))

	for it, err := range st.List(ctx, "invoices/") {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s\n", it.Key, it.Value)
	}
	fmt.Println("atomic compare-and-swap:", st.Capabilities().CASAtomic)
	// Output:
	// stale compare-and-swap conflicts: true
	// invoices/2026-0001: sealed record, v2
	// atomic compare-and-swap: false
}
