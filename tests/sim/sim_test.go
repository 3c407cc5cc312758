package sim_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/tests/sim"
)

var (
	flagSeed      = flag.Uint64("sim.seed", 0, "run only the schedule of this seed (replay)")
	flagReplay    = flag.String("sim.replay", "", "run only the schedule saved in this file (a shrunk one)")
	flagBase      = flag.Uint64("sim.base", 1, "seed of the first schedule")
	flagSchedules = flag.Int("sim.schedules", 200, "schedules to run (with -sim.minutes: at most)")
	flagOps       = flag.Int("sim.ops", 80, "operations per schedule, about")
	flagMinutes   = flag.Float64("sim.minutes", 0, "run schedules for this long instead of a count")
	flagBudget    = flag.Duration("sim.budget", 45*time.Second, "stop starting schedules after this long (the CI budget)")
	flagHostile   = flag.Int("sim.hostile", 2, "one schedule in this many is hostile (0: none)")
	flagShrink    = flag.Duration("sim.shrink", time.Minute, "time to shrink a failing schedule (0: no shrinking)")
	flagSlow      = flag.Bool("sim.slow", false, "slow mode: a PostgreSQL hub (NOYDB_PG_URL) and durable devices on disk")
	flagVerbose   = flag.Bool("sim.v", false, "print every schedule's outcome")
	flagRepeat    = flag.Int("sim.repeat", 1, "with -sim.seed or -sim.replay: run the schedule up to this many times, until it fails")
	flagParallel  = flag.Int("sim.parallel", 2, "schedules run at once")
	flagMaxFail   = flag.Int("sim.maxfail", 3, "stop starting schedules after this many failed")
	flagTarget    = flag.String("sim.target", "", "the check the shrinker keeps failing (default: the worst of the run)")
	flagKnown     = flag.Bool("sim.known", false, "also generate the triggers of known, reported defects")
	flagMemEvery  = flag.Duration("sim.memevery", 0, "print the memory in use this often (default: every minute of a -sim.minutes run)")
	flagHeapProf  = flag.String("sim.heapprofile", "", "with the memory lines, write a heap profile to FILE-<minutes>m.pprof")
)

// TestSimulation runs seeded random schedules of devices, a hub, people,
// series and records under injected faults, and checks each history: the
// numbers of every counter are one counter's (linearizable, no number
// twice, no gap but voids and calls whose outcome was unknown), every
// acknowledged write is there, ledgers verify, devices converge; hostile
// schedules end with a detection error or a documented outcome, never a
// number twice. A failure prints its seed and a shrunk history.
func TestSimulation(t *testing.T) {
	ctx := context.Background()
	opts := sim.RunOptions{Stats: &sim.Stats{}}
	if *flagSlow {
		url := pgtest.URL(t) // skips, or fails under CI, without a server
		opts.Durable = true
		opts.Hub = func(ctx context.Context) (stores.Store, func(), error) {
			st, err := pgstore.Open(ctx, url, &pgstore.Options{Schema: pgtest.Schema(t)})
			if err != nil {
				return nil, nil, err
			}
			return st, func() { _ = st.Close() }, nil
		}
	}
	var schedules []*sim.Schedule
	switch {
	case *flagReplay != "":
		s, err := sim.Load(*flagReplay)
		if err != nil {
			t.Fatal(err)
		}
		schedules = append(schedules, s)
	case *flagSeed != 0:
		schedules = append(schedules, sim.Generate(*flagSeed, params(*flagSeed)))
	}
	sim.ShrinkCheck = *flagTarget
	start := time.Now()
	budget := *flagBudget
	if *flagMinutes > 0 {
		budget = time.Duration(*flagMinutes * float64(time.Minute))
	}
	every := *flagMemEvery
	if every == 0 && *flagMinutes > 0 {
		every = time.Minute
	}
	mem := watchMemory(time.Second, every, *flagHeapProf, opts.Stats.Schedules.Load)
	var failures atomic.Int64
	scratch := t.TempDir()
	if !*flagSlow {
		// The fast mode keeps its state folders and file devices in memory
		// (tmpfs), where an fsync costs nothing: the code paths are the
		// same, the disk is not what it tests.
		if dir, err := os.MkdirTemp("/dev/shm", "noydb-sim-"); err == nil {
			scratch = dir
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
		}
	}
	runOne := func(s *sim.Schedule) {
		o := opts
		dir, err := os.MkdirTemp(scratch, "run-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		o.Dir = dir
		res, err := sim.Run(ctx, s, o)
		if err != nil {
			t.Errorf("seed %d: %v", s.Seed, err)
			return
		}
		if *flagVerbose {
			t.Logf("seed %d: %d ops, %d faults, detected %v, documented %d, undecided %d, failures %d",
				s.Seed, res.Ops, res.Faults, res.Detected, len(res.Documented), res.Unknown, len(res.Failures))
		}
		for _, d := range res.Documented {
			t.Logf("seed %d: documented (not a failure): %s: %s", s.Seed, d.Fault, d.Detail)
		}
		if !res.Failed() {
			return
		}
		failures.Add(1)
		t.Errorf("%s", res.Report(s))
		if *flagShrink > 0 && *flagReplay == "" {
			small, sres := sim.Shrink(ctx, s, res, o, *flagShrink)
			path := filepath.Join(os.TempDir(), fmt.Sprintf("noydb-sim-%d.json", s.Seed))
			if err := small.Save(path); err == nil {
				t.Errorf("shrunk to %d steps, %d ops (replay: go test ./tests/sim -run TestSimulation -sim.replay=%s):\n%s",
					len(small.Steps), small.Ops(), path, sres.Report(small))
			}
		}
	}
	if len(schedules) > 0 {
		for _, s := range schedules {
			for range *flagRepeat {
				if runOne(s); failures.Load() > 0 {
					break
				}
			}
		}
	} else {
		// Schedules run -sim.parallel at a time: a run waits on its
		// goroutines and stores more than it computes.
		seeds := make(chan uint64)
		var wg sync.WaitGroup
		for range max(*flagParallel, 1) {
			wg.Go(func() {
				for seed := range seeds {
					runOne(sim.Generate(seed, params(seed)))
				}
			})
		}
		for i := range *flagSchedules {
			if time.Since(start) > budget || failures.Load() >= int64(*flagMaxFail) {
				break
			}
			seeds <- *flagBase + uint64(i)
		}
		close(seeds)
		wg.Wait()
	}
	st := opts.Stats
	fmt.Printf("sim: %d schedules, %d operations, %d faults injected (%d store faults), %d failures, %s wall, %s CPU\n",
		st.Schedules.Load(), st.Ops.Load(), st.Faults.Load()+st.Injected.Load(), st.Injected.Load(),
		st.Failures.Load(), time.Since(start).Round(time.Millisecond), cpuTime().Round(time.Millisecond))
	fmt.Printf("sim: memory: %s\n", mem.end(*flagHeapProf))
}

func params(seed uint64) sim.Params {
	return sim.Params{Ops: *flagOps, Hostile: *flagHostile > 0 && seed%uint64(*flagHostile) == 0, Known: *flagKnown}
}

// TestSavedSchedules replays each shrunk schedule kept in testdata (one per
// defect the simulation found, once fixed) a few times: a replay runs the
// same schedule but may interleave its goroutines differently, and each of
// these failed about one replay in two before its fix.
func TestSavedSchedules(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	replays := 6
	if testing.Short() {
		replays = 2
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := sim.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			for range replays {
				res, err := sim.Run(context.Background(), s, sim.RunOptions{Dir: t.TempDir()})
				if err != nil {
					t.Fatal(err)
				}
				if res.Failed() {
					t.Fatalf("%s", res.Report(s))
				}
			}
		})
	}
}
