package sim

import (
	"context"
	"runtime"
	"testing"
	"weak"
)

// TestRunLeavesNoStoreBehind runs a few schedules and checks that, once
// each returned, the garbage collector takes back every store it made (the
// hub's and each device's): a long run keeps nothing per schedule, so its
// memory does not grow with the schedules it ran.
func TestRunLeavesNoStoreBehind(t *testing.T) {
	var kept []weak.Pointer[storeCtl]
	var names []string
	onWorld = func(w *world) {
		for _, c := range append([]*storeCtl{w.hub}, w.ctls()...) {
			kept = append(kept, weak.Make(c))
			names = append(names, c.name)
		}
	}
	defer func() { onWorld = nil }()
	for seed := range uint64(6) {
		s := Generate(seed+1, Params{Ops: 60, Hostile: seed%2 == 0})
		if _, err := Run(context.Background(), s, RunOptions{Dir: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC() // the pools' victim caches go at the second
	left := 0
	for i, p := range kept {
		if p.Value() != nil {
			left++
			t.Errorf("the store of %s outlives its run", names[i])
		}
	}
	if left > 0 {
		t.Fatalf("%d of %d stores outlive their runs", left, len(kept))
	}
}
