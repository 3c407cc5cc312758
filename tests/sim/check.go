package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// Failure is one broken promise found in a run.
type Failure struct {
	Check  string   // which checker: "duplicate", "linearizability", "error", …
	Detail string   // what broke
	Events []*Event // the operations involved, when known
}

func (f Failure) String() string { return f.Check + ": " + f.Detail }

// Documented is a number issued twice in a case the README's threat table
// documents as undetectable: not a failure, but reported.
type Documented struct {
	Fault  string
	Detail string
}

// Result is the outcome of one run.
type Result struct {
	Seed       uint64
	Ops        int
	Faults     int
	Failures   []Failure
	Documented []Documented
	Detected   map[string]int // hostile runs: detection errors seen, by kind
	Unknown    int            // counters the linearizability check could not decide in time
	History    *history
}

// Failed reports whether the run broke a promise.
func (r *Result) Failed() bool { return len(r.Failures) > 0 }

// honestErr reports whether err is one an honest but faulty system gives:
// an injected store fault, an unreachable hub, a crash, a conflict, a
// documented refusal.
func honestErr(err error) bool {
	var ce *sequence.CorrectionError
	for _, target := range []error{
		faultstore.ErrInjected, faultstore.ErrInjectedAfter, stores.ErrConflict, stores.ErrUnavailable,
		sequence.ErrContention, sequence.ErrOffline, errCrashed, stores.ErrClosed, context.Canceled,
		context.DeadlineExceeded, vault.ErrNotOnDevice, sequence.ErrPeriodClosed, sequence.ErrAlreadyVoided,
		vault.ErrConflict, vault.ErrNotFound, numbering.ErrPassRunning,
		vault.ErrNoAccess, vault.ErrNotPermitted, vault.ErrPersonExists, stores.ErrLockHeld,
		stores.ErrNotSupported, // a transaction on a store without them
		errNotJoined,           // an operation of a device that waits for the late join
		sequence.ErrSkipped,    // a number a late join seeded past, voided on the hub (see checkAudits)
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return errors.As(err, &ce)
}

// detectionErr reports whether err is how the SDK says a store or hub
// lied.
func detectionErr(err error) (string, bool) {
	for _, t := range []struct {
		name string
		err  error
	}{
		{"ErrRollback", vault.ErrRollback}, {"ErrHubTampered", vault.ErrHubTampered},
		{"ErrTampered", vault.ErrTampered}, {"ErrMisbehaving", stores.ErrMisbehaving},
		{"ErrVaultLost", vault.ErrVaultLost}, {"ErrStateLost", vault.ErrStateLost},
		{"ErrCorrupt", sequence.ErrCorrupt}, {"ErrHubBehind", vault.ErrHubBehind},
		{"ErrDuplicate", numbering.ErrDuplicate}, {"ErrHubMismatch", vault.ErrHubMismatch},
	} {
		if errors.Is(err, t.err) {
			return t.name, true
		}
	}
	return "", false
}

// regime says what a run's hostile faults allow.
type regime struct {
	hostileAt int64  // logical time of the first hostile fault, 0 when none
	dupOK     string // a fault that makes a number issued twice documented ("" when none)
	lies      int    // hostile faults
	forks     int    // of which FFork
}

// check runs every checker over a finished run.
func (w *world) check(res *Result, reg regime) {
	h := w.hist
	fail := func(check, detail string, evs ...*Event) {
		res.Failures = append(res.Failures, Failure{Check: check, Detail: detail, Events: evs})
	}
	res.Detected = map[string]int{}
	// Errors: honest runs see only honest errors; hostile runs also the
	// detection errors, and never a panic.
	for _, e := range h.events {
		if e.Err == nil {
			continue
		}
		if errors.Is(e.Err, errPanic) {
			fail("panic", e.Err.Error(), e)
			continue
		}
		if honestErr(e.Err) {
			continue
		}
		if name, ok := detectionErr(e.Err); ok {
			if reg.hostileAt > 0 && e.Return >= reg.hostileAt {
				res.Detected[name]++
				continue
			}
			fail("false alarm", fmt.Sprintf("%s on an honest store: %v", name, e.Err), e)
			continue
		}
		if e.Op.Kind == KVoid && errors.Is(e.Err, sequence.ErrNotIssued) && h.issuedInOtherViewOnly(e) {
			// The number was given in the other view of a fork: the
			// view this void was served never issued it.
			res.Documented = append(res.Documented, Documented{Fault: forkDoc, Detail: shortErr(e.Err)})
			continue
		}
		if e.Op.Kind == KVoid && errors.Is(e.Err, sequence.ErrNotIssued) && h.allLostToDrop(h.gaveBefore(e.Key, e.N, e.Call), e) {
			// The hub deleted the ledger that recorded the number, and
			// this device never saw it.
			res.Documented = append(res.Documented, Documented{Fault: dropDoc, Detail: shortErr(e.Err)})
			continue
		}
		if reg.dupOK != "" && e.Return >= reg.hostileAt && e.Op.Kind == KVoid && errors.Is(e.Err, sequence.ErrNotIssued) {
			// The hub lost its ledger with its counters: nothing records
			// the number, so a device without its pins takes it for never
			// issued (as the numbers given twice, documented).
			res.Documented = append(res.Documented, Documented{Fault: reg.dupOK, Detail: shortErr(e.Err)})
			continue
		}
		fail("unexpected error", e.Err.Error(), e)
	}
	w.checkClosed(res, reg, fail)
	w.conflicts = nil
	w.checkNumbers(res, reg, fail)
	for _, c := range w.conflicts {
		if h.splitViews(c.Events[0], c.Events[1]) {
			res.Documented = append(res.Documented, Documented{Fault: forkDoc, Detail: c.Detail})
			continue
		}
		if h.lostToDrop(c.Events[0], c.Events[1]) {
			res.Documented = append(res.Documented, Documented{Fault: dropDoc, Detail: c.Detail})
			continue
		}
		if reg.dupOK != "" && c.Events[1].Call >= reg.hostileAt {
			res.Documented = append(res.Documented, Documented{Fault: reg.dupOK, Detail: c.Detail})
			continue
		}
		res.Failures = append(res.Failures, c)
	}
	w.checkFork(res, reg.forks > 0 && reg.forks == reg.lies, fail)
}

// checkClosed: no number dated into a period after its ClosePeriod
// returned, and no refusal of a period nobody tried to close.
func (w *world) checkClosed(res *Result, reg regime, fail func(string, string, ...*Event)) {
	h := w.hist
	for _, e := range h.events {
		if e.Key == "" || e.Op.Kind == kPeek {
			continue
		}
		at, closed := h.closedAt[e.Key]
		if e.Outcome == ok && e.N > 0 && closed && e.Call > at && e.Op.Kind != KVoid && e.Op.Kind != KClose {
			if h.fork != nil && !h.closedInView(e.Key, e) {
				// Closed in the other view of a fork only.
				res.Documented = append(res.Documented, Documented{Fault: forkDoc,
					Detail: fmt.Sprintf("%s got %d in %s, closed in the other view", e.Op, e.N, e.Key)})
				continue
			}
			if h.allLostToDrop(h.closesBefore(e.Key, e.Call), e) {
				// The hub deleted the ledger that recorded the close.
				res.Documented = append(res.Documented, Documented{Fault: dropDoc,
					Detail: fmt.Sprintf("%s got %d in %s after it was closed", e.Op, e.N, e.Key)})
				continue
			}
			if reg.dupOK != "" && e.Call >= reg.hostileAt {
				// The hub lost the close with the commits it lost.
				res.Documented = append(res.Documented, Documented{Fault: reg.dupOK,
					Detail: fmt.Sprintf("%s got %d in %s after it was closed", e.Op, e.N, e.Key)})
				continue
			}
			fail("closed period", fmt.Sprintf("%s got %d in %s after it was closed at t=%d", e.Op, e.N, e.Key, at), e)
		}
		if errors.Is(e.Err, sequence.ErrPeriodClosed) && !h.closing[e.Key] {
			fail("closed period", fmt.Sprintf("%s refused as closed, but nobody closed %s", e.Op, e.Key), e)
		}
	}
}

// cop is one operation on a counter, as the linearizability check sees it.
type cop struct {
	call, ret int64
	k         int
	n         uint64 // first number; 0 when unknown
	peek      bool   // a read of the head
	ev        *Event
}

// logical merges retries into logical operations: the attempts of one
// PutNumbered, Numbered.Put or Claim (one record id, one request id) are
// one allocation, which took effect at most once.
func (w *world) logical() map[string][]cop {
	h := w.hist
	out := map[string][]cop{}
	groups := map[string]*cop{}
	var order []string
	for _, e := range h.events {
		if e.Key == "" || e.Op.Kind == KVoid || e.Op.Kind == KClose {
			continue
		}
		if e.Outcome == none {
			continue
		}
		c := cop{call: e.Call, ret: e.Return, k: max(e.K, 1), ev: e}
		if e.Outcome == ok {
			c.n = e.N
		}
		if e.Op.Kind == kPeek {
			c.peek, c.n = true, e.N
		}
		var group string
		switch e.Op.Kind {
		case KPutNumbered, KNumPut:
			group = "rec:" + e.Op.ID
		case KClaim:
			group = "claim:" + e.Op.ID
		}
		if group == "" {
			out[e.Key] = append(out[e.Key], c)
			continue
		}
		g, seen := groups[group]
		if !seen {
			cc := c
			groups[group] = &cc
			order = append(order, group)
			continue
		}
		// A later attempt: the allocation spans both; its number is the
		// first one an attempt reported, and every attempt that succeeds
		// must report it.
		if g.n != 0 && c.n != 0 && c.n != g.n {
			w.conflicts = append(w.conflicts, Failure{Check: "idempotence",
				Detail: fmt.Sprintf("%s answered %d, then %d", group, g.n, c.n), Events: []*Event{g.ev, c.ev}})
		}
		if g.n == 0 && c.n != 0 {
			g.n = c.n
			g.ret = c.ret
			g.ev = c.ev
		}
		if g.n == 0 {
			g.ret = c.ret
		}
	}
	for _, g := range order {
		c := groups[g]
		out[c.ev.Key] = append(out[c.ev.Key], *c)
	}
	return out
}

// kPeek is the final read of a counter's head, added by the final phase.
const kPeek Kind = 100

type cInput struct {
	peek bool
	k    int
}

type cOutput struct {
	n       uint64
	unknown bool
}

var counterModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{uint64(0)} },
	Step: func(state, in, out any) []any {
		head := state.(uint64)
		i, o := in.(cInput), out.(cOutput)
		switch {
		case i.peek:
			if o.n == head {
				return []any{head}
			}
			return nil
		case o.unknown:
			return []any{head, head + uint64(i.k)}
		case o.n == head+1:
			return []any{head + uint64(i.k)}
		}
		return nil
	},
	Hash: func(state any) uint64 { return state.(uint64) },
	DescribeOperation: func(in, out any) string {
		i, o := in.(cInput), out.(cOutput)
		switch {
		case i.peek:
			return fmt.Sprintf("peek -> %d", o.n)
		case o.unknown:
			return fmt.Sprintf("next(%d) -> ?", i.k)
		}
		return fmt.Sprintf("next(%d) -> %d", i.k, o.n)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}

// checkNumbers: per counter, no number handed to two callers, and the
// history of the counter is linearizable.
func (w *world) checkNumbers(res *Result, reg regime, fail func(string, string, ...*Event)) {
	for key, ops := range w.logical() {
		// In call order: of two operations given one number, the later
		// one is the second issuance.
		slices.SortStableFunc(ops, func(a, b cop) int { return cmp.Compare(a.call, b.call) })
		owner := map[uint64]*Event{}
		dup := false
		for _, c := range ops {
			if c.peek || c.n == 0 {
				continue
			}
			for i := range c.k {
				n := c.n + uint64(i)
				if prev, taken := owner[n]; taken {
					dup = true
					if w.hist.splitViews(prev, c.ev) {
						res.Documented = append(res.Documented, Documented{Fault: forkDoc,
							Detail: fmt.Sprintf("%s %d to %s and %s", key, n, prev.Op, c.ev.Op)})
						continue
					}
					if w.hist.lostToDrop(prev, c.ev) {
						res.Documented = append(res.Documented, Documented{Fault: dropDoc,
							Detail: fmt.Sprintf("%s %d to %s and %s", key, n, prev.Op, c.ev.Op)})
						continue
					}
					if reg.dupOK != "" && c.ev.Call >= reg.hostileAt {
						res.Documented = append(res.Documented, Documented{Fault: reg.dupOK,
							Detail: fmt.Sprintf("%s %d to %s and %s", key, n, prev.Op, c.ev.Op)})
						continue
					}
					fail("duplicate", fmt.Sprintf("%s: number %d handed out twice", key, n), prev, c.ev)
				}
				owner[n] = c.ev
			}
		}
		if dup && reg.dupOK != "" {
			continue // a documented rollback: the counter's history is not one counter's
		}
		if reg.hostileAt > 0 {
			continue // after a lie, what the counter serves is checked for duplicates only
		}
		var hist []porcupine.Operation
		for i, c := range ops {
			in, out := cInput{peek: c.peek, k: c.k}, cOutput{n: c.n, unknown: !c.peek && c.n == 0}
			ret := c.ret
			if out.unknown {
				ret = math.MaxInt64 // an ambiguous commit may land at any time after its call
			}
			hist = append(hist, porcupine.Operation{ClientId: i, Input: in, Output: out, Call: c.call, Return: ret, Metadata: c.ev})
		}
		result, _ := porcupine.CheckOperationsVerbose(counterModel.ToModel(), hist, 10*time.Second)
		switch result {
		case porcupine.Illegal:
			fail("linearizability", fmt.Sprintf("%s: the numbers are not the history of one counter:\n%s", key, counterStory(ops)))
		case porcupine.Unknown:
			res.Unknown++
		}
	}
}

// counterStory renders a counter's operations in call order.
func counterStory(ops []cop) string {
	s := slices.Clone(ops)
	sort.Slice(s, func(i, j int) bool { return s[i].call < s[j].call })
	var b strings.Builder
	for _, c := range s {
		switch {
		case c.peek:
			fmt.Fprintf(&b, "  [%d,%d] final head %d\n", c.call, c.ret, c.n)
		case c.n == 0:
			fmt.Fprintf(&b, "  [%d,%d] %s -> ? (%v)\n", c.call, c.ret, c.ev.Op, shortErr(c.ev.Err))
		default:
			fmt.Fprintf(&b, "  [%d,%d] %s -> %d..%d\n", c.call, c.ret, c.ev.Op, c.n, c.n+uint64(c.k)-1)
		}
	}
	return b.String()
}

func shortErr(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}
