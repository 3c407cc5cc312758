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

// Two Stores on one folder (or two processes) share its named locks:
// TryLock fails with stores.ErrLockHeld while another holds the lock.
func ExampleStore_TryLock() {
	dir, err := os.MkdirTemp("", "filestore-lock-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	a, err := filestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := filestore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	ctx := context.Background()
	unlock, err := a.TryLock(ctx, "nightly report")
	if err != nil {
		log.Fatal(err)
	}
	_, err = b.TryLock(ctx, "nightly report")
	fmt.Println("held by a:", errors.Is(err, stores.ErrLockHeld))
	unlock()
	unlockB, err := b.TryLock(ctx, "nightly report")
	fmt.Println("b after a's unlock:", err)
	unlockB()
	// Output:
	// held by a: true
	// b after a's unlock: <nil>
}
