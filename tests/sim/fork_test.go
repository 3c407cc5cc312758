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

// TestCheckerFailsAForkTheDeviceCannotSee runs the fork schedule with the
// mutation forkNeverEnds: the device takes its number after the fork's
// end on the copy still, with no ErrRollback, which is what a device that
// missed the fork would do. The checker reports "fork undetected".
func TestCheckerFailsAForkTheDeviceCannotSee(t *testing.T) {
	forkNeverEnds = true
	defer func() { forkNeverEnds = false }()
	s := forkSchedule()
	res, err := Run(context.Background(), s, RunOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.has("fork undetected") {
		t.Fatalf("the checker missed a fork the device could not detect: %v\n%s", res.Failures, res.Report(s))
	}
}

// TestForkedHubDetectsAPushToTheCopy: a forked device that only pushed a
// change to the hub's copy (no number) gets ErrRollback at its first sync
// once it is served the real hub again, which has moved on.
func TestForkedHubDetectsAPushToTheCopy(t *testing.T) {
	s := &Schedule{Seed: 2, Hostile: true, Devices: []Device{{Kind: "mem"}, {Kind: "badger"}},
		Steps: []Step{
			{Workers: [][]Op{{{Kind: KSync, Dev: 1}, {Kind: KNext, Dev: 0, Series: "tick"}}}},
			{Faults: []Fault{{Kind: FFork, Target: 1, Span: 1}}, Workers: [][]Op{
				{{Kind: KPut, Dev: 1, ID: "n1", Val: 1}, {Kind: KSync, Dev: 1}},
				{{Kind: KNext, Dev: 0, Series: "tick"}}}},
			{Workers: [][]Op{{{Kind: KSync, Dev: 1}}}},
		}}
	res, err := Run(context.Background(), s, RunOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() {
		t.Fatalf("%s", res.Report(s))
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
// and the same history where the device detects it; each also with a
// change pushed to the copy instead of a number. Only the undetected ones
// fail, with "fork undetected"; the numbers both views gave are
// documented.
func TestCheckerFailsAForkNotDetected(t *testing.T) {
	for _, c := range []struct {
		pushed, detected bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		pushed, detected := c.pushed, c.detected
		t.Run(fmt.Sprintf("pushed=%v,detected=%v", pushed, detected), func(t *testing.T) {
			w := &world{hist: newHistory()}
			f := &forkSpan{dev: 1, from: 10, to: 20}
			w.hist.fork = f
			ev := func(dev int, call int64, fork bool, n uint64) *Event {
				return &Event{Op: Op{Kind: KNext, Dev: dev, Series: "tick"}, Key: "tick", K: 1,
					Call: call, Return: call + 1, Outcome: ok, N: n, Fork: fork}
			}
			w.hist.add(ev(0, 1, false, 1))
			if pushed {
				// No number on the copy: a change pushed to it.
				w.hist.add(&Event{Op: Op{Kind: KPut, Dev: 1, ID: "n"}, Call: 11, Return: 12, Outcome: ok})
				w.hist.add(&Event{Op: Op{Kind: KSync, Dev: 1}, Call: 13, Return: 14, Outcome: ok, Fork: true})
			} else {
				w.hist.add(ev(1, 11, true, 2))
			}
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
			if !pushed && (len(res.Documented) != 1 || res.Documented[0].Fault != forkDoc) {
				t.Fatalf("documented: %v", res.Documented)
			}
		})
	}
}
