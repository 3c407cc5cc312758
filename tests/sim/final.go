package sim

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// Run runs schedule s and checks it.
func Run(ctx context.Context, s *Schedule, o RunOptions) (*Result, error) {
	t0 := time.Now()
	w, done, err := newWorld(ctx, s, o)
	if err != nil {
		return nil, err
	}
	defer func() {
		t4 := time.Now()
		done()
		if slowOps {
			fmt.Printf("phases: seed %d close %s\n", s.Seed, time.Since(t4))
		}
	}()
	if onWorld != nil {
		onWorld(w)
	}
	w.stats.Schedules.Add(1)
	res := &Result{Seed: s.Seed, Ops: s.Ops(), Faults: s.Faults(), History: w.hist}
	// Set-up: the first device creates the vault, the others (unless
	// device 0 joins late) get it from the hub.
	for i, d := range w.devs {
		if s.LateJoin && i > 0 {
			break
		}
		if err := w.open(ctx, d); err != nil {
			return nil, fmt.Errorf("set-up: open d%d: %w", i, err)
		}
	}
	var reg regime
	ledgerLost := false
	for si, st := range s.Steps {
		for _, f := range append(slices.Clone(st.Faults), derefFault(st.During)...) {
			if f.Kind.Hostile() && reg.hostileAt == 0 {
				reg.hostileAt = w.hist.clock.Load() + 1
			}
			if f.Kind.Hostile() {
				reg.lies++
				if f.Kind == FFork {
					reg.forks++
				}
			}
			if f.Kind.Hostile() && reg.dupOK == "" {
				reg.dupOK = documentedDup(f)
			}
			if f.Target == Hub && (f.Prefix == "" || f.Prefix == "_ledger/") &&
				(f.Kind == FDrop || f.Kind == FRollback || f.Kind == FLoseCommits) {
				ledgerLost = true
			}
			if f.Restart && ledgerLost && reg.dupOK == "" {
				// The hub lost its ledger, then its counters, and a device
				// starts without its pins: nothing is left to compare with.
				reg.dupOK = "hub ledger and counters lost, device state folder new (threat table: detected only with StateDir)"
			}
		}
		w.runStep(ctx, si, st)
	}
	t2 := time.Now()
	w.heal(ctx, res, reg)
	t3 := time.Now()
	w.check(res, reg)
	if slowOps {
		fmt.Printf("phases: seed %d steps %s heal %s check %s\n", s.Seed, t2.Sub(t0), t3.Sub(t2), time.Since(t3))
	}
	if len(res.Failures) > 0 {
		w.stats.Failures.Add(1)
	}
	return res, nil
}

// onWorld, when set (by a test), is given each run's world.
var onWorld func(*world)

func derefFault(f *Fault) []Fault {
	if f == nil {
		return nil
	}
	return []Fault{*f}
}

// documentedDup says whether the README's threat table documents a number
// issued twice after fault f, and which row.
func documentedDup(f Fault) string {
	switch {
	case f.Target == Hub && (f.Kind == FRollback || f.Kind == FLoseCommits) && (f.Prefix == "" || f.Prefix == "_ledger/"):
		// "the hub rolls back to an older state": ErrRollback on a device
		// that has seen newer; "acknowledges changes, then loses them":
		// a device that never saw them cannot tell.
		return "hub rolled back (threat table: a device that never saw the lost changes cannot tell)"
	case f.Target == Hub && f.Kind == FReplay && f.Prefix == "_sequences/":
		return ""
	}
	return ""
}

// heal ends the faults, brings every device back, syncs them all and
// settles the deferred numbers; then it records the final heads.
func (w *world) heal(ctx context.Context, res *Result, reg regime) {
	fail := func(check, detail string) {
		res.Failures = append(res.Failures, Failure{Check: check, Detail: detail})
	}
	hostile := reg.hostileAt > 0
	w.endFork() // every device is served the real hub again
	w.calm()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if w.sched.LateJoin && !w.joined.Load() {
		w.devs = w.devs[:1] // the others never got the vault
	}
	for _, d := range w.devs {
		d.dropGuest()
		if err := w.open(ctx, d); err != nil {
			if !hostile {
				fail("heal", fmt.Sprintf("d%d does not open once the faults end: %v", d.idx, err))
			}
			_, detected := detectionErr(err)
			if detected || w.fork != nil && w.fork.dev == d.idx {
				// How the forked device learns of the fork, if it is
				// here, or a device of a lie it detects at its open.
				e := &Event{Op: Op{Kind: kHeal, Dev: d.idx}, Call: w.hist.tick(), Skip: "vault not open", Outcome: none, Err: err}
				e.Return = w.hist.tick()
				w.hist.add(e)
			}
		}
	}
	if hostile {
		w.healHostile(ctx, res)
		return
	}
	syncAll := func(last bool) {
		for _, d := range w.devs {
			if !d.onHub || d.h == nil {
				continue
			}
			e := &Event{Op: Op{Kind: kHeal, Dev: d.idx}, Call: w.hist.tick()}
			rep, err := d.h.v.Sync(ctx)
			e.Return, e.Conflicts, e.Outcome, e.Err = w.hist.tick(), lost(rep), ok, nil
			w.hist.add(e)
			if err != nil && last {
				fail("heal", fmt.Sprintf("d%d: final sync: %v", d.idx, err))
			}
		}
	}
	syncAll(false)
	syncAll(false)
	for _, d := range w.devs {
		if d.h == nil {
			continue
		}
		if _, err := d.h.rc.Settle(ctx); err != nil {
			fail("heal", fmt.Sprintf("d%d: final settle: %v", d.idx, err))
		}
		if d.onHub {
			break // one pass on the hub numbers everything pushed
		}
	}
	syncAll(false)
	syncAll(true)
	w.finalHeads(ctx, res)
	w.checkAudits(ctx, res)
	w.checkLedgers(ctx, res)
	w.checkRecords(ctx, res)
	w.checkReceipts(ctx, res)
}

// healHostile: after a lie, every call may fail with its detection error,
// but none may panic or hang; the final heads are not checked.
func (w *world) healHostile(ctx context.Context, res *Result) {
	for _, d := range w.devs {
		if d.h == nil {
			continue
		}
		for _, call := range []func() error{
			func() error {
				if !d.onHub {
					return nil
				}
				_, err := d.h.v.Sync(ctx)
				return err
			},
			func() error { _, err := d.h.v.Audit().Verify(ctx); return err },
			func() error { _, err := d.h.seqs["tick"].Audit(ctx); return err },
		} {
			e := &Event{Op: Op{Kind: kHeal, Dev: d.idx}, Call: w.hist.tick()}
			err := protect(call)
			e.Return = w.hist.tick()
			settle(e, err)
			w.hist.add(e)
		}
	}
}

const kHeal Kind = 101

func protect(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v\n%s", errPanic, r, debug.Stack())
		}
	}()
	return f()
}

// counterKeys lists the counters the history touched.
func (w *world) counterKeys() []string {
	keys := map[string]bool{}
	for _, e := range w.hist.events {
		if e.Key != "" {
			keys[e.Key] = true
		}
	}
	return slices.Sorted(maps.Keys(keys))
}

// handleFor returns the handle of a counter key on h.
func handleFor(h *handles, key string) *sequence.Sequence {
	parts := strings.Split(key, "/")
	switch parts[0] {
	case "inv":
		return h.seqs["inv/"+parts[1]].At(monthDate(parts[2]))
	case "cn":
		return h.seqs["cn"].At(monthDate(parts[1]))
	}
	return h.seqs[parts[0]]
}

func monthDate(label string) time.Time {
	t, err := time.Parse("2006-01", label)
	if err != nil {
		panic(err)
	}
	return t.AddDate(0, 0, 14)
}

// anyOpen returns an open device, preferring one on the hub.
func (w *world) anyOpen() *device {
	for _, d := range w.devs {
		if d.h != nil && d.onHub {
			return d
		}
	}
	for _, d := range w.devs {
		if d.h != nil {
			return d
		}
	}
	return nil
}

// finalHeads reads each counter's head once everything settled, as the last
// operation of its history.
func (w *world) finalHeads(ctx context.Context, res *Result) {
	d := w.anyOpen()
	if d == nil {
		return
	}
	for _, key := range w.counterKeys() {
		if key == "rcpt" {
			// One head per series: the receipts' counter carries the
			// passes' numbers too, which the history does not hold (a
			// pass cut after its commit gives them to the next one).
			// checkReceipts checks the series whole, by its audit.
			continue
		}
		e := &Event{Op: Op{Kind: kPeek, Dev: d.idx}, Key: key, Call: w.hist.tick()}
		n, err := handleFor(d.h, key).Peek(ctx)
		e.Return = w.hist.tick()
		if err != nil {
			res.Failures = append(res.Failures, Failure{Check: "final head", Detail: fmt.Sprintf("peek %s: %v", key, err)})
			continue
		}
		e.N, e.Outcome = n, ok
		w.hist.add(e)
	}
}

// checkAudits: each counter's Audit accounts for the numbers the history
// handed out: a number a caller got is issued (bound or unbound), never
// missing or seeded; a void that succeeded shows; an invoice's number is
// bound to it.
func (w *world) checkAudits(ctx context.Context, res *Result) {
	d := w.anyOpen()
	if d == nil {
		return
	}
	fail := func(detail string) {
		res.Failures = append(res.Failures, Failure{Check: "audit", Detail: detail})
	}
	for _, key := range w.counterKeys() {
		if key == "rcpt" {
			continue // audited with the receipts
		}
		rep, err := handleFor(d.h, key).Audit(ctx)
		if err != nil {
			fail(fmt.Sprintf("%s: %v", key, err))
			continue
		}
		if rep.Missing > 0 {
			fail(fmt.Sprintf("%s: %d numbers missing from the history (head %d)", key, rep.Missing, rep.Head))
		}
		state := map[uint64]sequence.NumberAudit{}
		for na := range rep.Numbers() {
			state[na.N] = na
		}
		// The numbers of the claims made on the device before it joined,
		// by request id: a claim of one of them after the join gets it
		// again, from what the join brought.
		// (0: the outcome of such a claim was unknown: whatever number
		// it took, if any, the join brought.)
		before := map[string]uint64{}
		for _, e := range w.hist.events {
			if e.Key == key && e.Op.Kind == KClaim && e.Return < w.hist.joinAt && (e.Outcome == ok || e.Outcome == unknown) {
				if n, seen := before[e.Op.ID]; !seen || n != 0 {
					before[e.Op.ID] = e.N
				}
			}
		}
		broughtClaim := func(e *Event) bool {
			n, seen := before[e.Op.ID]
			return e.Op.Kind == KClaim && seen && (n == e.N || n == 0)
		}
		for _, e := range w.hist.events {
			if e.Key != key {
				continue
			}
			switch {
			case e.Op.Kind == KVoid && e.Outcome == ok:
				if e.Return < w.hist.joinAt {
					continue // voided on the device before it joined: the hub's history has a seeded run there
				}
				if state[e.N].State != sequence.StateVoided {
					fail(fmt.Sprintf("%s: %d was voided (%s) but audits %s", key, e.N, e.Op, state[e.N].State))
				}
			case e.Op.Kind == KPutNumbered && e.Outcome == ok:
				na := state[e.N]
				if na.State == sequence.StateSeeded && e.Return < w.hist.joinAt {
					continue
				}
				if na.State != sequence.StateBound || na.ID != e.Op.ID {
					fail(fmt.Sprintf("%s: %d was given to invoice %s but audits %s (%s/%s)", key, e.N, e.Op.ID, na.State, na.Collection, na.ID))
				}
			case e.Outcome == ok && e.N > 0 && e.Op.Kind != KClose && e.Op.Kind != kPeek:
				for i := range max(e.K, 1) {
					st := state[e.N+uint64(i)].State
					if st == sequence.StateSeeded && (e.Return < w.hist.joinAt || broughtClaim(e)) {
						continue // taken on the device before it joined: the join seeded the hub past it
					}
					if st != sequence.StateUnbound && st != sequence.StateBound && st != sequence.StateVoided {
						fail(fmt.Sprintf("%s: %d was handed out (%s) but audits %s", key, e.N+uint64(i), e.Op, st))
					}
				}
			}
		}
	}
}

// checkLedgers: every device's ledger verifies.
func (w *world) checkLedgers(ctx context.Context, res *Result) {
	for _, d := range w.devs {
		if d.h == nil {
			continue
		}
		rep, err := d.h.v.Audit().Verify(ctx)
		if err != nil {
			res.Failures = append(res.Failures, Failure{Check: "verify", Detail: fmt.Sprintf("d%d: %v", d.idx, err)})
			continue
		}
		if !rep.OK() {
			res.Failures = append(res.Failures, Failure{Check: "verify", Detail: fmt.Sprintf("d%d: %v at %d", d.idx, rep.Problem, rep.FirstBad)})
		}
	}
}

// checkRecords: every acknowledged write is there (or a later write of the
// same record could have replaced it), and the devices converged.
func (w *world) checkRecords(ctx context.Context, res *Result) {
	fail := func(detail string) {
		res.Failures = append(res.Failures, Failure{Check: "records", Detail: detail})
	}
	// The values each note may hold: the last acknowledged write, and any
	// write after it whose outcome is unknown.
	possible := map[string]map[string]bool{}
	apply := func(id string, val *int, o outcome) {
		v := "absent"
		if val != nil {
			v = fmt.Sprint(*val)
		}
		if possible[id] == nil {
			possible[id] = map[string]bool{"absent": true}
		}
		switch o {
		case ok:
			possible[id] = map[string]bool{v: true}
		case unknown:
			possible[id][v] = true
		}
	}
	for _, e := range w.hist.events {
		switch e.Op.Kind {
		case KPut:
			apply(e.Op.ID, e.Val, e.Outcome)
		case KDelete:
			if e.Outcome == none {
				continue
			}
			apply(e.Op.ID, nil, e.Outcome)
		case KUpdate:
			if e.Outcome == unknown {
				// fn may have been applied to any value the note could hold.
				for v := range possible[e.Op.ID] {
					var x int
					if _, err := fmt.Sscan(v, &x); err == nil {
						possible[e.Op.ID][fmt.Sprint(x+1000)] = true
					}
				}
				continue
			}
			if e.Outcome == ok {
				apply(e.Op.ID, e.Val, ok)
			}
		case KTx:
			apply(e.Op.ID, e.Val, e.Outcome)
			apply(e.Op.ID2, e.Val2, e.Outcome)
		}
	}
	var views []map[string]string
	var names []string
	for _, d := range w.devs {
		if d.h == nil {
			continue
		}
		view := map[string]string{}
		for rec, err := range d.h.notes.List(ctx) {
			if err != nil {
				fail(fmt.Sprintf("d%d: list notes: %v", d.idx, err))
				break
			}
			view[rec.ID] = fmt.Sprint(rec.Value.Val)
		}
		views = append(views, view)
		names = append(names, fmt.Sprintf("d%d", d.idx))
		for id, vals := range possible {
			got, found := view[id]
			if !found {
				got = "absent"
			}
			if !vals[got] && (d.onHub || ownID(id, d.idx)) {
				if why := w.excused(id); why != "" {
					res.Documented = append(res.Documented, Documented{Fault: why,
						Detail: fmt.Sprintf("d%d: note %s holds %s; the history allows %v", d.idx, id, got, slices.Sorted(maps.Keys(vals)))})
					continue
				}
				res.Failures = append(res.Failures, Failure{Check: "records",
					Detail: fmt.Sprintf("d%d: note %s holds %s; the history allows %v", d.idx, id, got, slices.Sorted(maps.Keys(vals))),
					Events: w.eventsOf(id)})
			}
		}
	}
	for i := 1; i < len(views); i++ {
		for _, v := range []map[string]string{views[0], views[i]} {
			for id := range v {
				if why := w.excused(id); why != "" && views[0][id] != views[i][id] {
					res.Documented = append(res.Documented, Documented{Fault: why, Detail: "devices differ on note " + id})
					delete(views[0], id)
					delete(views[i], id)
				}
			}
		}
		if !maps.Equal(views[0], views[i]) && w.devs[i].onHub && w.devs[0].onHub {
			fail(fmt.Sprintf("devices did not converge after the final sync: %s %v, %s %v", names[0], diff(views[0], views[i]), names[i], diff(views[i], views[0])))
		}
	}
}

// ownID reports whether a note id was written by device d.
func ownID(id string, d int) bool { return strings.HasPrefix(id, fmt.Sprintf("d%dw", d)) }

// diff lists the entries of a that b does not hold alike.
func diff(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// checkReceipts: after the final pass every receipt carries one number,
// no number two receipts, and the series audits clean.
func (w *world) checkReceipts(ctx context.Context, res *Result) {
	fail := func(detail string) {
		res.Failures = append(res.Failures, Failure{Check: "receipts", Detail: detail})
	}
	d := w.anyOpen()
	if d == nil {
		return
	}
	owner := map[uint64]string{}
	for rec, err := range vault.CollectionOf[Receipt](d.h.v, "receipts").List(ctx) {
		if err != nil {
			fail(fmt.Sprintf("list: %v", err))
			return
		}
		nr, err := d.h.rc.Get(ctx, rec.ID)
		if err != nil {
			fail(fmt.Sprintf("get %s: %v", rec.ID, err))
			continue
		}
		if nr.Pending || nr.Serial.N == 0 {
			if !w.sched.LateJoin {
				fail(fmt.Sprintf("%s still pending after the final pass", rec.ID))
			}
			continue
		}
		if prev, dup := owner[nr.Serial.N]; dup {
			fail(fmt.Sprintf("number %d carried by %s and %s", nr.Serial.N, prev, rec.ID))
		}
		owner[nr.Serial.N] = rec.ID
	}
	a, err := d.h.rc.Audit(ctx)
	if err != nil {
		fail(fmt.Sprintf("audit: %v", err))
		return
	}
	if !a.Clean() {
		fail(fmt.Sprintf("audit not clean: deferred %+v; online head %d missing %d", a.Deferred, a.Online.Head, a.Online.Missing))
	}
}

// eventsOf lists the operations on one note.
func (w *world) eventsOf(id string) []*Event {
	var out []*Event
	for _, e := range w.hist.events {
		if e.Op.ID == id || e.Op.ID2 == id {
			out = append(out, e)
		}
	}
	return out
}

// excused says why a note may hold a value its history does not allow, or
// differ between devices, in a case the README documents: on a store
// without transactions a write that failed may have written its record
// without its ledger entry, which a sync then never pushes. A sync
// conflict is no excuse: each device writes notes of its own, so none
// arises on an honest schedule, and a note lost to one is a lost
// acknowledged write.
func (w *world) excused(id string) string {
	for _, e := range w.hist.events {
		if (e.Op.ID == id || e.Op.ID2 == id) && e.Outcome == unknown && w.devs[e.Op.Dev].kind == "file" {
			return "a failed write on a store without transactions: record written, no ledger entry (README caveat)"
		}
	}
	return ""
}
