package sim_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memWatch samples the test binary's memory while a long run goes on: a
// run's memory must stay flat (in proportion to the schedules running at
// once, not to those finished), and a long run that grows is stopped by
// the kernel before it prints its summary. It prints a line every so
// often and keeps the peaks for the summary.
type memWatch struct {
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup

	mu       sync.Mutex
	peakHeap uint64 // HeapInuse, bytes
	peakRSS  uint64 // resident set, bytes
	peakGor  int
}

type memSample struct {
	heap, rss uint64
	gor       int
}

// watchMemory starts sampling every period (and printing every print,
// when not zero); schedules reports how many schedules ran so far. With
// profile set, each printed line also writes a heap profile to
// profile-<minutes>m.pprof.
func watchMemory(period, print time.Duration, profile string, schedules func() int64) *memWatch {
	m := &memWatch{start: time.Now(), stop: make(chan struct{})}
	m.done.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		lastPrint := time.Now()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
			s := m.sample()
			if print > 0 && time.Since(lastPrint) >= print {
				lastPrint = time.Now()
				// What the heap holds after a collection: what the run
				// keeps, without the garbage not yet collected.
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				fmt.Printf("sim mem: %s, %d schedules: heap live %s (in use %s before a GC), RSS %s, %d goroutines\n",
					time.Since(m.start).Round(time.Second), schedules(), mib(ms.HeapAlloc), mib(s.heap), mib(s.rss), s.gor)
				if profile != "" {
					writeHeapProfile(fmt.Sprintf("%s-%dm.pprof", profile, int(time.Since(m.start).Minutes())))
				}
			}
		}
	})
	return m
}

func (m *memWatch) sample() memSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := memSample{heap: ms.HeapInuse, rss: rss(), gor: runtime.NumGoroutine()}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peakHeap = max(m.peakHeap, s.heap)
	m.peakRSS = max(m.peakRSS, s.rss)
	m.peakGor = max(m.peakGor, s.gor)
	return s
}

// end stops sampling and returns the summary's words on memory.
func (m *memWatch) end(profile string) string {
	close(m.stop)
	m.done.Wait()
	s := m.sample()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if profile != "" {
		writeHeapProfile(profile + "-end.pprof")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return fmt.Sprintf("peak heap in use %s, peak RSS %s, peak %d goroutines; at the end: heap live %s, %d goroutines",
		mib(m.peakHeap), mib(m.peakRSS), m.peakGor, mib(ms.HeapAlloc), s.gor)
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Printf("sim mem: %v\n", err)
		return
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Printf("sim mem: %v\n", err)
	}
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }

// rss is the resident set of this process (0 where /proc is not).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
