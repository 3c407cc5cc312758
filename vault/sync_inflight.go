package vault

import "sync"

// Local writes in flight on a device without transactions.
//
// On a store without transactions (a file folder) a write is two steps:
// the record by compare-and-swap, then its ledger entry (write). A sync's
// staged pull takes a record that differs from its sync base, with no
// entry of the device's own after the push cursor, for what a staged
// commit cut before its base left (applyOne): true after a crash, but also
// of a write of this handle between its two steps, whose change the pull
// would then replace with the hub's revision, silently. So each such write
// names its record here while in flight, and the pull counts a record
// named here as the device's own change. The pull asks after it has read
// the record and before it reads the device's ledger: a write no longer
// in flight by then has appended its entry, and one that starts after
// makes the pull's compare-and-swap fail (the commit runs again).
//
// Writes of another handle or process on the same folder are not seen:
// for them the gap stays what the README says of a write on such a store.

// inflight counts, by record, the writes in flight.
type inflight struct {
	mu sync.Mutex
	n  map[recKey]int
}

// begin names k as written until the returned function is called.
func (f *inflight) begin(k recKey) func() {
	f.mu.Lock()
	if f.n == nil {
		f.n = map[recKey]int{}
	}
	f.n[k]++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.n[k]--; f.n[k] == 0 {
			delete(f.n, k)
		}
		f.mu.Unlock()
	}
}

// has reports whether a write of k is in flight.
func (f *inflight) has(k recKey) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[k] > 0
}
