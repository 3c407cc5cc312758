package sim

import "slices"

// dropDoc is the threat table's row for a hub that deletes its ledger.
const dropDoc = "hub dropped its ledger (threat table: a device that never saw the lost changes cannot tell)"

// dropSpan is when the hub deleted its ledger (FDrop of "_ledger/" or of
// everything): logical times before and after the keys went.
type dropSpan struct{ from, to int64 }

// hubOp reports whether e, which succeeded, read the hub's ledger head and
// left it pinned on its device: a sync, an operation of a counter (the
// numbers of a device on the hub are the hub's), or the late device's
// join. A device that ran one after a number was given has seen it.
func (h *history) hubOp(e *Event) bool {
	if e.Outcome != ok {
		return false
	}
	if h.lateJoin && e.Op.Dev == 0 && e.Call < h.joinAt {
		return false // its own counters, before it joined
	}
	return e.Op.Kind == KSync || (e.Key != "" && e.Op.Kind != kPeek)
}

// sawBefore reports whether device dev saw what event g did before the
// drop d began: dev is g's device, or it joined the hub, synced or
// numbered on it after g returned and before d.
func (h *history) sawBefore(dev int, g *Event, d dropSpan) bool {
	if dev == g.Op.Dev {
		return true
	}
	if h.lateJoin && dev == 0 && h.joinAt > g.Return && h.joinAt < d.from {
		return true
	}
	for _, e := range h.events {
		if e.Op.Dev == dev && e.Call > g.Return && e.Return < d.from && h.hubOp(e) {
			return true
		}
	}
	return false
}

// lostToDrop reports whether e, which contradicts g (it gave g's number
// again, answered g's claim id with another number, found g's number
// never issued, or numbered in a period g closed), is the README's "a
// device that never saw the lost changes cannot tell" for a hub that
// deleted its ledger: g may have reached the hub before a drop and e
// returned after it began; e's device had not seen g before the drop; and
// a device that had seen g detected the drop (a detection error) after
// it. A drop no device detects, or a device that saw g acting as if it
// had not, is a failure.
func (h *history) lostToDrop(g, e *Event) bool {
	for _, d := range h.drops {
		if g.Call >= d.to || e.Return <= d.from || h.sawBefore(e.Op.Dev, g, d) {
			continue
		}
		for _, x := range h.events {
			if x.Return <= d.from || x.Err == nil {
				continue
			}
			if _, ok := detectionErr(x.Err); ok && h.sawBefore(x.Op.Dev, g, d) {
				return true
			}
		}
	}
	return false
}

// gaveBefore lists the events that handed out number n of key before t.
func (h *history) gaveBefore(key string, n uint64, t int64) []*Event {
	var out []*Event
	for _, g := range h.events {
		if g.Key == key && gaveNumber(g) && g.Return < t && n >= g.N && n < g.N+uint64(max(g.K, 1)) {
			out = append(out, g)
		}
	}
	return out
}

// allLostToDrop reports whether gs is not empty and each of them is lost
// to a drop as e sees it.
func (h *history) allLostToDrop(gs []*Event, e *Event) bool {
	return len(gs) > 0 && !slices.ContainsFunc(gs, func(g *Event) bool { return !h.lostToDrop(g, e) })
}

// closesBefore lists the ClosePeriods of key that succeeded before t.
func (h *history) closesBefore(key string, t int64) []*Event {
	var out []*Event
	for _, c := range h.events {
		if c.Op.Kind == KClose && c.Key == key && c.Outcome == ok && c.Return < t {
			out = append(out, c)
		}
	}
	return out
}
