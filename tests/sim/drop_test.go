package sim

import (
	"fmt"
	"testing"

	"github.com/noydb-go/noydb/vault"
)

// TestCheckerFailsADropNotDetected feeds the checker the history of a hub
// that deletes its ledger and counters after device 1 claimed a number:
// device 2, which never saw it, then gives that number again (another
// request id) or answers device 1's request id with a new number (the
// README's "a device that never saw the lost changes cannot tell"). The
// run passes, the number documented, only when device 1 detects the drop
// afterwards (ErrRollback). It fails when no device detects it, when only
// the device that never saw the number reports an error, and when device
// 2 had synced after the claim and before the drop (it saw the number,
// and must not give it again).
func TestCheckerFailsADropNotDetected(t *testing.T) {
	for _, c := range []struct {
		sameID   bool // device 2 claims device 1's request id
		detector int  // the device that gets ErrRollback after the drop (-1: none)
		saw      bool // device 2 synced after the claim, before the drop
		passes   bool
	}{
		{false, 1, false, true},
		{true, 1, false, true},
		{false, -1, false, false},
		{true, -1, false, false},
		{false, 2, false, false},
		{true, 2, false, false},
		{false, 1, true, false},
		{true, 1, true, false},
	} {
		t.Run(fmt.Sprintf("sameID=%v,detector=%d,saw=%v", c.sameID, c.detector, c.saw), func(t *testing.T) {
			w := &world{hist: newHistory()}
			h := w.hist
			claim := func(dev int, id string, call int64, n uint64) *Event {
				return &Event{Op: Op{Kind: KClaim, Dev: dev, Series: "clm", ID: id}, Key: "clm", K: 1,
					Call: call, Return: call + 1, Outcome: ok, N: n}
			}
			h.add(claim(1, "c1", 1, 1))
			if c.saw {
				h.add(&Event{Op: Op{Kind: KSync, Dev: 2}, Call: 3, Return: 4, Outcome: ok})
			}
			h.drops = []dropSpan{{from: 10, to: 11}}
			id, n := "c2", uint64(1)
			if c.sameID {
				id, n = "c1", 2
			}
			h.add(claim(2, id, 20, n))
			if c.detector >= 0 {
				h.add(&Event{Op: Op{Kind: kHeal, Dev: c.detector}, Call: 30, Return: 31, Outcome: unknown,
					Err: fmt.Errorf("sync: %w", vault.ErrRollback)})
			}
			res := &Result{}
			w.check(res, regime{hostileAt: 10, lies: 2})
			want := "duplicate"
			if c.sameID {
				want = "idempotence"
			}
			if c.passes {
				if res.Failed() {
					t.Fatalf("a drop detected by the device that saw the number fails the checker: %v", res.Failures)
				}
				if len(res.Documented) != 1 || res.Documented[0].Fault != dropDoc {
					t.Fatalf("documented: %v", res.Documented)
				}
				return
			}
			if !res.has(want) {
				t.Fatalf("the checker passes a drop it must fail (%s): failures %v, documented %v", want, res.Failures, res.Documented)
			}
		})
	}
}
