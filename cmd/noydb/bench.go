package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// maxCallers bounds --callers: each caller is a goroutine.
const maxCallers = 100_000

// benchLevel is the outcome of one concurrency level.
type benchLevel struct {
	Callers    int     `json:"callers"`
	Series     string  `json:"series"`
	Numbers    int     `json:"numbers"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"numbers_per_second"`
	P50        float64 `json:"p50_us"`
	P99        float64 `json:"p99_us"`
	Contention int     `json:"contention_errors"`
	Errors     int     `json:"other_errors"`
	// Exact is true when the numbers issued are exactly 1..Numbers, each once,
	// and the counter agrees.
	Exact   bool   `json:"exact"`
	Problem string `json:"problem,omitempty"`
}

func (a *app) benchCmd() *cobra.Command {
	var callersFlag string
	var seconds float64
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure gap-free numbering on the chosen store",
		Long: `Run 'seq next' on the chosen --store for --seconds at each concurrency level
of --callers, each level on a fresh series, and print numbers/s, the p50 and
p99 latency of one call, and how many calls failed on contention (other
processes winning the race for the counter) or otherwise.

Then it checks the point of the exercise: the numbers issued at each level
are exactly 1..N, each once, and the counter stands at N. Exit status 1 when
they are not, or when a call failed with anything but contention.

The series are made in the vault "bench" (or --vault if given), so a real
vault's ledger is not filled with benchmark allocations. On mem: no secret is
needed.`,
		Example: `  noydb bench --store mem: --seconds 2
  noydb bench --store postgres://localhost/noydb --callers 1,64,512 --json`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			callers, err := parseCallers(callersFlag)
			if err != nil {
				return err
			}
			if !(seconds > 0 && seconds <= 24*3600) {
				return usagef("--seconds must be above 0 and at most a day")
			}
			if !cmd.Flags().Changed("vault") {
				a.vaultName = "bench"
			}
			if spec, err := a.parsedStore(); err == nil && spec.kind == "mem" {
				a.fixedSecret, a.quietMem = []byte("noydb-bench-throwaway"), true
			}
			a.create = true // a throwaway vault of its own
			v, err := a.openVault(ctx)
			if err != nil {
				return err
			}
			if !a.store.Capabilities().CASAtomic {
				return sequence.ErrOffline
			}
			d := time.Duration(seconds * float64(time.Second))
			if !a.json {
				fmt.Fprintf(a.io.out, "bench: seq next on %s (vault %q), %s per level, a fresh series per level\n", a.spec, a.vaultName, d)
			}
			// Fixed widths rather than a tabwriter: each row prints as its level ends.
			const row = "%7v  %9v  %9v  %9v  %9v  %10v  %6v  %s\n"
			if !a.json {
				fmt.Fprintf(a.io.out, row, "callers", "numbers", "numbers/s", "p50", "p99", "contention", "errors", "exact 1..N")
			}
			stamp := time.Now().UTC().Format("20060102-150405.000000")
			var levels []benchLevel
			failed := false
			for _, c := range callers {
				lv, err := a.benchLevel(ctx, v, fmt.Sprintf("bench-%s-c%d", stamp, c), c, d)
				if err != nil {
					return err
				}
				levels = append(levels, lv)
				failed = failed || !lv.Exact || lv.Errors > 0
				if !a.json {
					exact := "ok"
					if !lv.Exact {
						exact = "FAIL"
					}
					fmt.Fprintf(a.io.out, row, lv.Callers, lv.Numbers, fmt.Sprintf("%.0f", lv.PerSecond),
						micros(lv.P50), micros(lv.P99), lv.Contention, lv.Errors, exact)
				}
			}
			if a.json {
				if err := a.printJSON(levels); err != nil {
					return err
				}
			}
			if !failed {
				return nil
			}
			var problems []string
			for _, lv := range levels {
				if lv.Problem != "" {
					problems = append(problems, fmt.Sprintf("%d callers: %s", lv.Callers, lv.Problem))
				}
			}
			return fmt.Errorf("bench: %s", strings.Join(problems, "; "))
		},
	}
	cmd.Flags().StringVar(&callersFlag, "callers", "1,8,64,256", "concurrency levels: how many callers ask for numbers at once")
	cmd.Flags().Float64Var(&seconds, "seconds", 5, "how long each level runs")
	return cmd
}

func parseCallers(s string) ([]int, error) {
	var out []int
	for p := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > maxCallers {
			return nil, usagef("--callers %q: want a comma-separated list of numbers from 1 to %d", s, maxCallers)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchLevel is benchOne with a progress bar on a terminal: the level's
// time as the bar, the numbers taken so far after it.
func (a *app) benchLevel(ctx context.Context, v *vault.Vault, series string, callers int, d time.Duration) (benchLevel, error) {
	if !a.io.errTerminal || a.json {
		return benchOne(ctx, v, series, callers, d, nil)
	}
	var taken atomic.Uint64
	bar := a.progress(fmt.Sprintf("%d callers", callers), uint64(d.Milliseconds()))
	bar.counts = func(uint64, uint64) string { return fmt.Sprintf("%d numbers", taken.Load()) }
	stop := make(chan struct{})
	drawn := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(drawn)
		t := time.NewTicker(redrawEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				bar.done()
				return
			case <-t.C:
				bar.set(uint64(time.Since(start).Milliseconds()))
			}
		}
	}()
	lv, err := benchOne(ctx, v, series, callers, d, &taken)
	close(stop)
	<-drawn
	return lv, err
}

// benchOne runs callers goroutines calling Next on a fresh series for d and
// checks that what they got is exactly 1..N. taken, when set, counts the
// numbers as they come.
func benchOne(ctx context.Context, v *vault.Vault, series string, callers int, d time.Duration, taken *atomic.Uint64) (benchLevel, error) {
	s, err := v.Sequence(series, sequence.Options{})
	if err != nil {
		return benchLevel{}, err
	}
	type worker struct {
		nums       []uint64
		lat        []time.Duration
		contention int
		errs       int
		err        error
	}
	ws := make([]worker, callers)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range ws {
		wg.Go(func() {
			w := &ws[i]
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				n, err := s.Next(ctx)
				lat := time.Since(t0)
				if n > 0 { // a number taken is counted, even when an error came with it
					w.nums = append(w.nums, n)
					w.lat = append(w.lat, lat)
					if taken != nil {
						taken.Add(1)
					}
				}
				switch {
				case err == nil:
				case errors.Is(err, sequence.ErrContention):
					w.contention++
				case ctx.Err() != nil:
					return
				default:
					w.errs++
					w.err = err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return benchLevel{}, err
	}

	lv := benchLevel{Callers: callers, Series: series, Seconds: elapsed.Seconds()}
	var nums []uint64
	var lats []time.Duration
	for _, w := range ws {
		nums = append(nums, w.nums...)
		lats = append(lats, w.lat...)
		lv.Contention += w.contention
		lv.Errors += w.errs
		if w.err != nil && lv.Problem == "" {
			lv.Problem = w.err.Error()
		}
	}
	lv.Numbers = len(nums)
	lv.PerSecond = float64(len(nums)) / elapsed.Seconds()
	if len(lats) > 0 {
		slices.Sort(lats)
		lv.P50 = float64(lats[len(lats)*50/100].Nanoseconds()) / 1e3
		lv.P99 = float64(lats[len(lats)*99/100].Nanoseconds()) / 1e3
	}
	head, err := s.Peek(ctx)
	if err != nil {
		return benchLevel{}, err
	}
	if problem := exactSet(nums, head); problem != "" {
		lv.Problem = problem
	} else {
		lv.Exact = true
	}
	return lv, nil
}

// exactSet checks that nums is exactly 1..len(nums), in any order, and that
// the counter's head is len(nums); it says what is wrong, or "".
func exactSet(nums []uint64, head uint64) string {
	sorted := slices.Clone(nums)
	slices.Sort(sorted)
	for i, n := range sorted {
		want := uint64(i) + 1
		switch {
		case n == want:
			continue
		case n < want:
			return fmt.Sprintf("number %d issued twice", n)
		default:
			return fmt.Sprintf("number %d never issued (the next one issued is %d)", want, n)
		}
	}
	if head != uint64(len(sorted)) {
		return fmt.Sprintf("%d numbers issued but the counter is at %d", len(sorted), head)
	}
	return ""
}

// micros formats a latency given in microseconds.
func micros(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%.1fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	}
	return fmt.Sprintf("%.2fs", us/1e6)
}
