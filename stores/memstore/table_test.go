package memstore

import (
	"fmt"
	"slices"
	"testing"
)

// TestTableKeysSharingAHash: keys whose hashes are equal (every key, with
// this hash) are each found, replaced, counted, listed and deleted on
// their own, whichever of them holds the hash's place.
func TestTableKeysSharingAHash(t *testing.T) {
	for _, hash := range map[string]func(string) uint64{
		"one hash for all": func(string) uint64 { return 7 },
		"two hashes":       func(k string) uint64 { return uint64(len(k) % 2) },
	} {
		tb := table{hash: hash, byHash: make(map[uint64]entry)}
		want := map[string]uint64{}
		check := func(step string) {
			t.Helper()
			if tb.len() != len(want) {
				t.Fatalf("%s: len %d, want %d", step, tb.len(), len(want))
			}
			for k, v := range want {
				if e, ok := tb.get(k); !ok || e.version != v || e.key != k {
					t.Fatalf("%s: get %q = %+v, %v; want version %d", step, k, e, ok, v)
				}
			}
			keys := tb.keys(nil)
			slices.Sort(keys)
			var wk []string
			for k := range want {
				wk = append(wk, k)
			}
			slices.Sort(wk)
			if !slices.Equal(keys, wk) {
				t.Fatalf("%s: keys %q, want %q", step, keys, wk)
			}
			if _, ok := tb.get("absent"); ok {
				t.Fatalf("%s: an absent key found", step)
			}
		}
		for i := range 6 {
			k := fmt.Sprint("k", i, "-", i%3 == 0)
			if !tb.set(entry{key: k, version: uint64(i + 1)}) {
				t.Fatalf("set %q: not reported new", k)
			}
			want[k] = uint64(i + 1)
			check("after set " + k)
		}
		for k := range want {
			if tb.set(entry{key: k, version: want[k] + 100}) {
				t.Fatalf("replace %q: reported new", k)
			}
			want[k] += 100
		}
		check("after replacing every key")
		if tb.del("absent") {
			t.Fatal("delete of an absent key reported")
		}
		for _, k := range tb.keys(nil) { // the holder of a hash first, then the others
			if !tb.del(k) {
				t.Fatalf("delete %q: not reported", k)
			}
			delete(want, k)
			check("after delete " + k)
			if tb.del(k) {
				t.Fatalf("delete %q again: reported", k)
			}
		}
	}
}
