package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestTransactionAfterAFailedOneSeesNoneOfItsWrites: the store reuses one
// transaction value from Update to Update; the writes of one that failed,
// small or grown past its first room, and of one that committed, are not
// carried into the next as its own uncommitted writes.
func TestTransactionAfterAFailedOneSeesNoneOfItsWrites(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	refused := errors.New("refused")
	for _, writes := range []int{1, 40} {
		err := s.Update(ctx, func(tx stores.Tx) error {
			for i := range writes {
				if err := tx.Put(fmt.Sprintf("k/%02d", i), []byte("dropped")); err != nil {
					return err
				}
			}
			return refused
		})
		if !errors.Is(err, refused) {
			t.Fatalf("%d writes: Update = %v, want the closure's error", writes, err)
		}
		err = s.Update(ctx, func(tx stores.Tx) error {
			for i := range writes {
				if _, err := tx.Get(fmt.Sprintf("k/%02d", i)); !errors.Is(err, stores.ErrNotFound) {
					return fmt.Errorf("k/%02d after a failed transaction: %v, want ErrNotFound", i, err)
				}
			}
			return tx.Put("committed", []byte{byte(writes)})
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := s.Update(ctx, func(tx stores.Tx) error {
		it, err := tx.Get("committed")
		if err != nil || string(it.Value) != string([]byte{40}) || it.Version == 0 {
			return fmt.Errorf("committed = %v, %v; want the last commit's value with its version", it, err)
		}
		return tx.Delete("committed")
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "committed"); !errors.Is(err, stores.ErrNotFound) {
		t.Fatalf("committed after its delete: %v, want ErrNotFound", err)
	}
}
