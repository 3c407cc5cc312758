package numbering

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"weak"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestPassLockOnAStoreWithoutLocksKeepsNoStore: the pass lock of a series
// on a store that is not a stores.Locker is held in this process; once
// released it keeps nothing of the store, so a process that opens many
// stores (a server, a simulation) does not keep each one it numbered on.
// While held, a second pass of the series is refused.
func TestPassLockOnAStoreWithoutLocksKeepsNoStore(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	kept := weak.Make(st)
	s := &Series{b: deferred.Backend{Store: st}, dir: "v/shop/_numbering/receipts/"}
	release, err := s.lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.lock(ctx); !errors.Is(err, ErrPassRunning) {
		t.Fatalf("second lock while held: %v, want ErrPassRunning", err)
	}
	release()
	again, err := s.lock(ctx)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
	s, st = nil, nil
	runtime.GC()
	if kept.Value() != nil {
		t.Fatal("the store outlives every handle of it: the pass lock keeps it")
	}
}
