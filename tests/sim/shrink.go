package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// ShrinkCheck, if set, is the check a shrinker keeps failing (else the
// worst one of the run).
var ShrinkCheck string

// ShrinkTries is how many runs a shrinker's candidate gets to fail.
var ShrinkTries = 4

// Shrink cuts a failing schedule down to fewer steps and operations that
// still fail the same check. A run is not fully deterministic (goroutines
// interleave as the scheduler lets them), so each candidate gets a few
// tries. It returns the smallest failing schedule found and its result.
func Shrink(ctx context.Context, s *Schedule, first *Result, o RunOptions, budget time.Duration) (*Schedule, *Result) {
	check := first.Worst()
	if ShrinkCheck != "" && first.has(ShrinkCheck) {
		check = ShrinkCheck
	}
	deadline := time.Now().Add(budget)
	fails := func(c *Schedule) *Result {
		for range ShrinkTries {
			if time.Now().After(deadline) {
				return nil
			}
			oo := o
			oo.Stats = nil
			dir, err := tempDir(o.Dir)
			if err != nil {
				return nil
			}
			oo.Dir = dir
			r, err := Run(ctx, c, oo)
			removeAll(dir)
			if err == nil && r.has(check) {
				return r
			}
		}
		return nil
	}
	best, bestRes := s, first
	// Steps first, in halves, quarters, … (delta debugging).
	for chunk := len(best.Steps) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i < len(best.Steps); {
			cand := *best
			cand.Steps = slices.Concat(best.Steps[:i], best.Steps[min(i+chunk, len(best.Steps)):])
			if len(cand.Steps) > 0 {
				if r := fails(&cand); r != nil {
					best, bestRes = &cand, r
					continue
				}
			}
			i += chunk
		}
	}
	// Then single operations and faults.
	for si := 0; si < len(best.Steps); si++ {
		for wi := 0; wi < len(best.Steps[si].Workers); wi++ {
			for oi := 0; oi < len(best.Steps[si].Workers[wi]); {
				cand := best.clone()
				w := cand.Steps[si].Workers[wi]
				cand.Steps[si].Workers[wi] = slices.Delete(slices.Clone(w), oi, oi+1)
				if r := fails(cand); r != nil {
					best, bestRes = cand, r
					continue
				}
				oi++
			}
		}
		for fi := 0; fi < len(best.Steps[si].Faults); {
			cand := best.clone()
			cand.Steps[si].Faults = slices.Delete(slices.Clone(cand.Steps[si].Faults), fi, fi+1)
			if r := fails(cand); r != nil {
				best, bestRes = cand, r
				continue
			}
			fi++
		}
		if best.Steps[si].During != nil {
			cand := best.clone()
			cand.Steps[si].During = nil
			if r := fails(cand); r != nil {
				best, bestRes = cand, r
			}
		}
	}
	return best, bestRes
}

// severity orders the checks, worst first: a shrinker keeps the worst.
var severity = []string{"duplicate", "fork undetected", "idempotence", "linearizability", "panic", "closed period",
	"false alarm", "records", "receipts", "audit", "verify", "final head", "heal", "unexpected error"}

// Worst returns the check of the run's worst failure.
func (r *Result) Worst() string {
	for _, c := range severity {
		if r.has(c) {
			return c
		}
	}
	return r.Failures[0].Check
}

func (r *Result) has(check string) bool {
	for _, f := range r.Failures {
		if f.Check == check {
			return true
		}
	}
	return false
}

func (s *Schedule) clone() *Schedule {
	c := *s
	c.Steps = make([]Step, len(s.Steps))
	for i, st := range s.Steps {
		c.Steps[i] = st
		c.Steps[i].Faults = slices.Clone(st.Faults)
		c.Steps[i].Workers = make([][]Op, len(st.Workers))
		for j, w := range st.Workers {
			c.Steps[i].Workers[j] = slices.Clone(w)
		}
	}
	return &c
}

// Script renders a schedule as the list of its steps, for a report.
func (s *Schedule) Script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: devices %v, late join %v, hostile %v, %d steps, %d ops\n",
		s.Seed, s.Devices, s.LateJoin, s.Hostile, len(s.Steps), s.Ops())
	for i, st := range s.Steps {
		for _, f := range st.Faults {
			fmt.Fprintf(&b, "  step %d: %s\n", i, f)
		}
		for wi, w := range st.Workers {
			var ops []string
			for _, o := range w {
				ops = append(ops, o.String())
			}
			fmt.Fprintf(&b, "  step %d worker %d: %s\n", i, wi, strings.Join(ops, "; "))
		}
		if st.During != nil {
			fmt.Fprintf(&b, "  step %d: during, after %d ops: %s\n", i, st.Trigger, *st.During)
		}
	}
	return b.String()
}

// Story renders a run's history: faults and operations in logical time.
func (r *Result) Story() string {
	var b strings.Builder
	h := r.History
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.faults {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	evs := slices.Clone(h.events)
	slices.SortFunc(evs, func(a, b *Event) int { return int(a.Call - b.Call) })
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// String renders one event.
func (e *Event) String() string {
	var res string
	switch {
	case e.Skip != "":
		res = "skipped: " + e.Skip
		if e.Err != nil {
			res += " (" + shortErr(e.Err) + ")"
		}
	case e.Err != nil:
		res = "error: " + shortErr(e.Err)
	case e.N > 0 && e.K > 1:
		res = fmt.Sprintf("%d..%d", e.N, e.N+uint64(e.K)-1)
	case e.N > 0:
		res = fmt.Sprint(e.N)
	case e.Val != nil:
		res = fmt.Sprintf("ok (val %d)", *e.Val)
	default:
		res = "ok"
	}
	op := e.Op.String()
	switch e.Op.Kind {
	case kPeek:
		op = fmt.Sprintf("final peek %s", e.Key)
	case kHeal:
		op = fmt.Sprintf("d%d heal", e.Op.Dev)
	}
	return fmt.Sprintf("[%d,%d] s%d w%d %s -> %s", e.Call, e.Return, e.Step, e.Worker, op, res)
}

// Report renders a failing run for a person: the seed, how to replay it,
// the failures and the history.
func (r *Result) Report(s *Schedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "FAILED schedule seed %d (replay: go test ./tests/sim -run TestSimulation -sim.seed=%d)\n", s.Seed, s.Seed)
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "- %s\n", f)
		for _, e := range f.Events {
			fmt.Fprintf(&b, "    %s\n", e)
		}
	}
	b.WriteString(s.Script())
	b.WriteString("history:\n")
	b.WriteString(r.Story())
	return b.String()
}

// Save writes s as JSON to path, for -sim.replay.
func (s *Schedule) Save(path string) error {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Load reads a schedule Save wrote.
func Load(path string) (*Schedule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Schedule
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("load schedule %s: %w", path, err)
	}
	return &s, nil
}

func tempDir(parent string) (string, error) { return os.MkdirTemp(parent, "shrink-") }

func removeAll(dir string) { _ = os.RemoveAll(dir) }
