package sim

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/noydb-go/noydb/vault"
)

// forkSchedule: two devices on the hub take numbers of one series; from
// step 1 the hub serves device 1 a copy of itself for two steps, so both
// devices take the numbers after the copy on their own; at step 3 device 1
// is served the real hub again and takes a number.
func forkSchedule() *Schedule {
	next := func(d int) Op { return Op{Kind: KNext, Dev: d, Series: "tick"} }
	return &Schedule{Seed: 1, Hostile: true, Devices: []Device{{Kind: "mem"}, {Kind: "mem"}},
		Steps: []Step{
			{Workers: [][]Op{{next(0), next(1), {Kind: KSync, Dev: 1}}}},
			{Faults: []Fault{{Kind: FFork, Target: 1, Span: 2}}, Workers: [][]Op{{next(0), next(0)}, {next(1), next(1)}}},
			{Workers: [][]Op{{next(0)}, {next(1)}}},
			{Workers: [][]Op{{next(1)}, {next(0)}}},
		}}
}

// TestForkedHubGivesNumbersTwiceAsDocumentedAndIsDetected: a run with a
// split-view hub passes the checks: the numbers both views gave are
// reported as documented by the threat table, not as duplicates, and the
// forked device gets ErrRollback once it is served the real hub again.
func TestForkedHubGivesNumbersTwiceAsDocumentedAndIsDetected(t *testing.T) {
	s := forkSchedule()
	res, err := Run(context.Background(), s, RunOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%s", res.Report(s))
	}
	docs := 0
	for _, d := range res.Documented {
		if d.Fault == forkDoc {
			docs++
		}
	}
	if docs == 0 {
		t.Fatalf("no number given twice by the two views reported as documented:\n%s", res.Report(s))
	}
	if res.Detected["ErrRollback"] == 0 {
		t.Fatalf("the forked device never got ErrRollback: %v\n%s", res.Detected, res.Report(s))
	}
}

// TestForkedHubScheduleSurvivesJSON: a schedule with a fork saved and
// loaded again is the same schedule (for -sim.replay and the shrinker).
func TestForkedHubScheduleSurvivesJSON(t *testing.T) {
	s := forkSchedule()
	path := t.TempDir() + "/fork.json"
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	l, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Script(), s.Script(); got != want {
		t.Fatalf("loaded:\n%s\nsaved:\n%s", got, want)
	}
	if !strings.Contains(l.Script(), "FAULT fork d1 (the hub serves it a copy for 2 steps)") {
		t.Fatalf("the fork is not in the script:\n%s", l.Script())
	}
}

// TestCheckerFailsAForkNotDetected feeds the checker the history a device
// that does not detect a fork makes (the mutation: after taking numbers
// on the hub's copy it takes one on the real hub with no ErrRollback),
// and the same history where the device detects it. Only the first fails,
// with "fork undetected"; the numbers both views gave are documented in
// both.
func TestCheckerFailsAForkNotDetected(t *testing.T) {
	for _, detected := range []bool{false, true} {
		t.Run(fmt.Sprintf("detected=%v", detected), func(t *testing.T) {
			w := &world{hist: newHistory()}
			f := &forkSpan{dev: 1, from: 10, to: 20}
			w.hist.fork = f
			ev := func(dev int, call int64, fork bool, n uint64) *Event {
				return &Event{Op: Op{Kind: KNext, Dev: dev, Series: "tick"}, Key: "tick", K: 1,
					Call: call, Return: call + 1, Outcome: ok, N: n, Fork: fork}
			}
			w.hist.add(ev(0, 1, false, 1))
			w.hist.add(ev(1, 11, true, 2))
			w.hist.add(ev(0, 13, false, 2))
			last := ev(1, 21, false, 3)
			if detected {
				last.Outcome, last.N, last.Err = unknown, 0, fmt.Errorf("sim: %w", vault.ErrRollback)
			}
			w.hist.add(last)
			res := &Result{}
			w.check(res, regime{hostileAt: 10, lies: 1, forks: 1})
			if !detected && !res.has("fork undetected") {
				t.Fatalf("a fork not detected passes the checker: %v", res.Failures)
			}
			if detected && res.Failed() {
				t.Fatalf("a detected fork fails the checker: %v", res.Failures)
			}
			if len(res.Documented) != 1 || res.Documented[0].Fault != forkDoc {
				t.Fatalf("documented: %v", res.Documented)
			}
		})
	}
}
