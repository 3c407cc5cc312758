package pgstore_test

// Fleet tests: many OS processes, each with its own noydb.DB and pgstore on
// one schema and vault, take numbers from one series on one server. The
// children are this test binary run again (TestFleetHelperProcess); each
// prints every number it was given, one line per number, the moment it has
// it, and the parent checks the whole set.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/internal/race"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// The fleet: fleetProcs processes × fleetGoroutines goroutines × fleetPer numbers.
const (
	fleetProcs      = 8
	fleetGoroutines = 4
	fleetPer        = 250
	fleetTotal      = fleetProcs * fleetGoroutines * fleetPer
)

// The vault every fleet member opens.
const (
	fleetUser       = "fleet"
	fleetSecret     = "fleet-secret"
	fleetVault      = "books"
	fleetSeries     = "invoice-2026"
	fleetCollection = "invoices"
)

// fleetGuard bounds a whole fleet run, so a hung child or lock fails the test
// instead of hanging it; it is never used to assert how long anything takes.
const fleetGuard = 5 * time.Minute

// Environment of a child process.
const (
	envFleetMode   = "NOYDB_FLEET_MODE" // "next" or "putnumbered"; unset: not a child
	envFleetURL    = "NOYDB_FLEET_URL"
	envFleetSchema = "NOYDB_FLEET_SCHEMA"
	envFleetChild  = "NOYDB_FLEET_CHILD" // the child's index, part of its record ids
	envFleetPer    = "NOYDB_FLEET_PER"   // numbers per goroutine; 0: until killed
)

// fleetRecord is what a PutNumbered child writes.
type fleetRecord struct {
	Number uint64
	Serial string
	By     string // the id the child gave the record
}

// fleetKDF keeps key derivation cheap; production vaults use crypto.DefaultKDF.
var fleetKDF = crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

// openFleetVault opens the fleet's vault on s (creating it on first use) as
// the fleet's user, with a DB of its own.
func openFleetVault(ctx context.Context, s stores.Store) (*noydb.DB, *vault.Vault, error) {
	db, err := noydb.Open(ctx, noydb.Config{
		User: fleetUser, Secret: []byte(fleetSecret), Store: s,
		KDF: fleetKDF, InsecureAllowWeakKDF: true,
	})
	if err != nil {
		return nil, nil, err
	}
	v, err := db.OpenVault(ctx, fleetVault)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return db, v, nil
}

// fleetVaultOn opens the fleet's vault on s for the test.
func fleetVaultOn(t testing.TB, s stores.Store) (*vault.Vault, *sequence.Sequence) {
	t.Helper()
	db, v, err := openFleetVault(context.Background(), s)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	seq, err := v.Sequence(fleetSeries, sequence.Options{})
	require.NoError(t, err)
	return v, seq
}

// TestFleetHelperProcess is a fleet member when run as a child by the fleet
// tests (envFleetMode set), and does nothing otherwise. It takes numbers with
// fleetGoroutines goroutines and prints each one on its own line the moment
// it has it: "n NUMBER" for Next, "n NUMBER ID" for PutNumbered.
func TestFleetHelperProcess(t *testing.T) {
	mode := os.Getenv(envFleetMode)
	if mode == "" {
		return // not a child: the fleet tests run this as one
	}
	per, err := strconv.Atoi(os.Getenv(envFleetPer))
	require.NoError(t, err)
	child := os.Getenv(envFleetChild)
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()

	s, err := pgstore.Open(ctx, os.Getenv(envFleetURL), &pgstore.Options{Schema: os.Getenv(envFleetSchema), MaxConns: 2})
	require.NoError(t, err)
	defer s.Close()
	v, seq := fleetVaultOn(t, s)
	invoices := vault.CollectionOf[fleetRecord](v, fleetCollection)

	take := func(g, i int) (string, error) {
		switch mode {
		case "next":
			n, err := seq.Next(ctx)
			return strconv.FormatUint(n, 10), err
		case "putnumbered":
			id := fmt.Sprintf("c%s-g%d-i%d", child, g, i)
			r, err := invoices.PutNumbered(ctx, id, seq, func(s sequence.Serial) (fleetRecord, error) {
				return fleetRecord{Number: s.N, Serial: s.Formatted, By: id}, nil
			})
			return strconv.FormatUint(r.Number, 10) + " " + id, err
		}
		return "", fmt.Errorf("unknown mode %q", mode)
	}
	var wg sync.WaitGroup
	for g := range fleetGoroutines {
		wg.Go(func() {
			for i := 0; per == 0 || i < per; i++ {
				line, err := take(g, i)
				if err != nil {
					t.Errorf("goroutine %d, call %d: %v", g, i, err)
					return
				}
				// os.Stdout is unbuffered: one write per line, and a line
				// shorter than PIPE_BUF reaches the pipe whole.
				if _, err := fmt.Fprintf(os.Stdout, "n %s\n", line); err != nil {
					t.Errorf("goroutine %d: print: %v", g, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// ack is a number a child acknowledged, with the record id in PutNumbered mode.
type ack struct {
	n  uint64
	id string
}

// fleetChild is a running child process.
type fleetChild struct {
	index  int
	cmd    *osexec.Cmd
	stderr bytes.Buffer
	read   chan struct{} // closed when stdout reached EOF
	acked  atomic.Int64

	mu    sync.Mutex
	acks  []ack
	other []string // stdout lines that are not numbers: test output
}

// startChild starts child index of a fleet on schema. onAck, if not nil, is
// called (from the reading goroutine) after every acknowledged number.
func startChild(t testing.TB, ctx context.Context, mode, dbURL, schema string, index, per int, onAck func(*fleetChild)) *fleetChild {
	t.Helper()
	return startFleetProcess(t, ctx, "TestFleetHelperProcess", index, onAck,
		envFleetMode+"="+mode,
		envFleetURL+"="+dbURL,
		envFleetSchema+"="+schema,
		envFleetChild+"="+strconv.Itoa(index),
		envFleetPer+"="+strconv.Itoa(per),
	)
}

// startFleetProcess starts this test binary running test run with env
// added, and reads the numbers it acknowledges ("n NUMBER [ID]" lines).
// onAck, if not nil, is called (from the reading goroutine) after each.
func startFleetProcess(t testing.TB, ctx context.Context, run string, index int, onAck func(*fleetChild), env ...string) *fleetChild {
	t.Helper()
	c := &fleetChild{index: index, read: make(chan struct{})}
	c.cmd = osexec.CommandContext(ctx, os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			a, ok := parseAck(line)
			c.mu.Lock()
			if ok {
				c.acks = append(c.acks, a)
			} else if line != "PASS" {
				c.other = append(c.other, line)
			}
			c.mu.Unlock()
			if ok {
				c.acked.Add(1)
				if onAck != nil {
					onAck(c)
				}
			}
		}
	}()
	return c
}

func parseAck(line string) (ack, bool) {
	rest, ok := strings.CutPrefix(line, "n ")
	if !ok {
		return ack{}, false
	}
	num, id, _ := strings.Cut(rest, " ")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 {
		return ack{}, false
	}
	return ack{n: n, id: id}, true
}

// wait waits for the child and returns its exit error, with what it said
// besides its numbers.
func (c *fleetChild) wait() (output string, err error) {
	<-c.read // Wait closes the pipe: read it all first
	err = c.cmd.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("child %d output:\n%s\nstderr:\n%s", c.index, strings.Join(c.other, "\n"), c.stderr.String()), err
}

func (c *fleetChild) acknowledged() []ack {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.acks)
}

// newFleet prepares a schema on dbURL with the fleet's vault created, so the
// children only open it, and returns the schema and the parent's handles.
func newFleet(t testing.TB, dbURL string) (schema string, v *vault.Vault, seq *sequence.Sequence) {
	t.Helper()
	schema = pgtest.Schema(t)
	s, err := pgstore.Open(context.Background(), dbURL, &pgstore.Options{Schema: schema, MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	v, seq = fleetVaultOn(t, s)
	return schema, v, seq
}

// runFleet runs fleetProcs children in mode, each with per numbers per
// goroutine, and returns every number acknowledged, by child. Children must
// all succeed.
func runFleet(t *testing.T, ctx context.Context, mode, dbURL, schema string) [][]ack {
	t.Helper()
	children := make([]*fleetChild, fleetProcs)
	for i := range children {
		children[i] = startChild(t, ctx, mode, dbURL, schema, i, fleetPer, nil)
	}
	acks := make([][]ack, fleetProcs)
	for i, c := range children {
		out, err := c.wait()
		require.NoError(t, err, out)
		acks[i] = c.acknowledged()
		require.Len(t, acks[i], fleetGoroutines*fleetPer, out)
	}
	return acks
}

func numbersOf(acks [][]ack) []uint64 {
	var ns []uint64
	for _, as := range acks {
		for _, a := range as {
			ns = append(ns, a.n)
		}
	}
	return ns
}

// assertDense asserts that ns holds every number from 1 to last exactly once.
func assertDense(t testing.TB, ns []uint64, last uint64, what string) bool {
	t.Helper()
	seen := make(map[uint64]int, len(ns))
	var dups, outside []uint64
	for _, n := range ns {
		seen[n]++
		if seen[n] == 2 {
			dups = append(dups, n)
		}
		if n < 1 || n > last {
			outside = append(outside, n)
		}
	}
	var missing []uint64
	for n := uint64(1); n <= last; n++ {
		if seen[n] == 0 {
			missing = append(missing, n)
		}
	}
	ok := assert.Empty(t, firstFew(dups), "%s: numbers given more than once", what)
	ok = assert.Empty(t, firstFew(outside), "%s: numbers outside 1..%d", what, last) && ok
	ok = assert.Empty(t, firstFew(missing), "%s: numbers of 1..%d missing", what, last) && ok
	return assert.Len(t, ns, int(last), what) && ok
}

// assertDistinct asserts that no number appears twice in ns and that all are in 1..last.
func assertDistinct(t testing.TB, ns []uint64, last uint64, what string) {
	t.Helper()
	seen := make(map[uint64]bool, len(ns))
	var dups, outside []uint64
	for _, n := range ns {
		if seen[n] {
			dups = append(dups, n)
		}
		seen[n] = true
		if n < 1 || n > last {
			outside = append(outside, n)
		}
	}
	assert.Empty(t, firstFew(dups), "%s: numbers given more than once", what)
	assert.Empty(t, firstFew(outside), "%s: numbers outside 1..%d", what, last)
}

// firstFew keeps failure messages short.
func firstFew(ns []uint64) []uint64 {
	slices.Sort(ns)
	if len(ns) > 20 {
		return ns[:20]
	}
	return ns
}

// audit is what a vault's ledger says about one series.
type audit struct {
	allocated []uint64          // Number of every NumberAllocated entry of the series
	putBy     map[uint64]string // Number → record id, of every RecordPut entry carrying a number
	putDups   []uint64          // numbers carried by more than one RecordPut
	entries   uint64
}

// auditLedger reads v's ledger from position 1 and checks it with Verify.
func auditLedger(t testing.TB, ctx context.Context, v *vault.Vault, series string) audit {
	t.Helper()
	a := audit{putBy: make(map[uint64]string)}
	for e, err := range v.Audit().Read(ctx, 1) {
		require.NoError(t, err, "read the ledger")
		a.entries++
		if e.Series != series {
			continue
		}
		switch e.Kind {
		case ledger.NumberAllocated:
			a.allocated = append(a.allocated, e.Number)
		case ledger.RecordPut:
			if _, dup := a.putBy[e.Number]; dup {
				a.putDups = append(a.putDups, e.Number)
			}
			a.putBy[e.Number] = e.ID
		}
	}
	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err, "verify the ledger")
	assert.True(t, rep.OK(), "ledger problem: %v", rep.Problem)
	assert.Equal(t, a.entries, rep.Entries, "Verify saw the entries Read did")
	return a
}

// TestFleetNext: fleetProcs processes × fleetGoroutines goroutines call Next
// fleetPer times each on one series: the numbers are exactly 1..fleetTotal,
// and the ledger shows exactly those allocations.
func TestFleetNext(t *testing.T) {
	dbURL := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()
	schema, v, seq := newFleet(t, dbURL)

	acks := runFleet(t, ctx, "next", dbURL, schema)
	assertDense(t, numbersOf(acks), fleetTotal, "numbers the children got")
	head, err := seq.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(fleetTotal), head, "Peek")
	a := auditLedger(t, ctx, v, fleetSeries)
	assertDense(t, a.allocated, fleetTotal, "ledger allocations")
	assert.Equal(t, uint64(fleetTotal), a.entries, "one ledger entry per number")
}

// TestFleetPutNumbered: the fleet writes fleetTotal records with PutNumbered,
// each carrying a distinct number of 1..fleetTotal, and the ledger shows
// every allocated number bound to the record that carries it.
func TestFleetPutNumbered(t *testing.T) {
	dbURL := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()
	schema, v, seq := newFleet(t, dbURL)

	acks := runFleet(t, ctx, "putnumbered", dbURL, schema)
	assertDense(t, numbersOf(acks), fleetTotal, "numbers the children got")
	ackedID := make(map[uint64]string, fleetTotal)
	for _, as := range acks {
		for _, a := range as {
			ackedID[a.n] = a.id
		}
	}

	// The records: one per id, each carrying its number.
	var stored []uint64
	ids := make(map[string]bool, fleetTotal)
	for r, err := range vault.CollectionOf[fleetRecord](v, fleetCollection).List(ctx) {
		require.NoError(t, err)
		ids[r.ID] = true
		stored = append(stored, r.Value.Number)
		assert.Equal(t, r.ID, r.Value.By, "record %s was built for another id", r.ID)
		assert.Equal(t, strconv.FormatUint(r.Value.Number, 10), r.Value.Serial, "record %s", r.ID)
		assert.Equal(t, ackedID[r.Value.Number], r.ID, "the child was told record %s got number %d", r.ID, r.Value.Number)
		assert.Equal(t, uint64(1), r.Revision, "record %s written once", r.ID)
	}
	assertDense(t, stored, fleetTotal, "numbers the records carry")
	for c := range fleetProcs {
		for g := range fleetGoroutines {
			for i := range fleetPer {
				if id := fmt.Sprintf("c%d-g%d-i%d", c, g, i); !ids[id] {
					t.Errorf("record %s missing", id)
				}
			}
		}
	}
	head, err := seq.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(fleetTotal), head, "Peek")

	// No unbound number: every allocation has its record's entry.
	a := auditLedger(t, ctx, v, fleetSeries)
	assertDense(t, a.allocated, fleetTotal, "ledger allocations")
	assert.Empty(t, firstFew(a.putDups), "numbers put on more than one record")
	var unbound []uint64
	for _, n := range a.allocated {
		id, ok := a.putBy[n]
		if !ok {
			unbound = append(unbound, n)
			continue
		}
		assert.Equal(t, ackedID[n], id, "the ledger binds number %d to record %s", n, id)
	}
	assert.Empty(t, firstFew(unbound), "allocated numbers no RecordPut carries")
	assert.Len(t, a.putBy, fleetTotal, "RecordPut entries carrying a number")

	// Sequence.Audit, reading the same ledger, agrees.
	rep, err := seq.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(fleetTotal), rep.Head, "audit head")
	assert.Equal(t, fleetTotal, rep.Bound, "audit: bound numbers")
	assert.Zero(t, rep.Unbound+rep.Missing+rep.Voided+rep.Seeded, "audit: numbers not bound")
}

// TestFleetKill kills one child with SIGKILL mid-run. No number it or the
// others acknowledged is lost or given twice, the counter has no gap (the
// ledger shows exactly 1..head allocated), and Next goes on from head+1.
func TestFleetKill(t *testing.T) {
	dbURL := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()
	schema, v, seq := newFleet(t, dbURL)

	// The victim runs until killed, so the kill always lands mid-run: once it
	// has acknowledged killAfter numbers and while the others still run.
	const killAfter = 100
	reached := make(chan struct{})
	var once sync.Once
	children := make([]*fleetChild, fleetProcs)
	children[0] = startChild(t, ctx, "next", dbURL, schema, 0, 0, func(c *fleetChild) {
		if c.acked.Load() >= killAfter {
			once.Do(func() { close(reached) })
		}
	})
	for i := 1; i < fleetProcs; i++ {
		children[i] = startChild(t, ctx, "next", dbURL, schema, i, fleetPer, nil)
	}
	select {
	case <-reached:
	case <-children[0].read:
		out, err := children[0].wait()
		t.Fatalf("the child to kill ended on its own: %v\n%s", err, out)
	}
	require.NoError(t, children[0].cmd.Process.Kill())
	out, err := children[0].wait()
	var exit *osexec.ExitError
	require.ErrorAs(t, err, &exit, out)
	assert.False(t, exit.Exited(), "the child was killed, not exited: %v", err)

	acks := make([][]ack, fleetProcs)
	acks[0] = children[0].acknowledged()
	for i := 1; i < fleetProcs; i++ {
		out, err := children[i].wait()
		require.NoError(t, err, out)
		acks[i] = children[i].acknowledged()
		require.Len(t, acks[i], fleetGoroutines*fleetPer, out)
	}
	t.Logf("the killed child acknowledged %d numbers", len(acks[0]))

	head, err := seq.Peek(ctx)
	require.NoError(t, err)
	acked := numbersOf(acks)
	require.GreaterOrEqual(t, head, uint64(len(acked)), "Peek is below the numbers acknowledged")
	assertDistinct(t, acked, head, "acknowledged numbers")
	a := auditLedger(t, ctx, v, fleetSeries)
	assertDense(t, a.allocated, head, "ledger allocations")

	// The counter goes on from its head.
	for i := uint64(1); i <= 3; i++ {
		n, err := seq.Next(ctx)
		require.NoError(t, err)
		assert.Equal(t, head+i, n, "Next after the kill")
	}
}

// TestFleetServerRestart crashes and restarts a private server while
// goroutines call Next. Calls may fail meanwhile; each caller retries within
// a bound. Afterwards no acknowledged number was given twice or lost, and the
// numbers allocated (the ledger's, and what callers got) are exactly 1..head.
func TestFleetServerRestart(t *testing.T) {
	srv := pgtest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()
	const (
		callers   = 16
		perCaller = 100
		conns     = 8
		// restartAfter numbers acknowledged, the server crashes.
		restartAfter = callers * perCaller / 4
		// A caller's retries after the restart: each stale pool connection
		// may fail one call, and a new one may need a moment to come up.
		maxRetries = 4 * conns
	)
	s := pgtest.OpenURL(t, srv.URL, &pgstore.Options{MaxConns: conns})
	v, seq := fleetVaultOn(t, s)

	reached := make(chan struct{})
	restarted := make(chan struct{})
	var acked atomic.Int64
	var failures atomic.Int64
	got := make([][]uint64, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for len(got[g]) < perCaller {
				n, err := seq.Next(ctx)
				retries := 0
				for err != nil {
					failures.Add(1)
					// An error before the restart is over means nothing: wait
					// for it, then retry a bounded number of times.
					select {
					case <-restarted:
					case <-ctx.Done():
						errs[g] = err
						return
					}
					if retries++; retries > maxRetries {
						errs[g] = fmt.Errorf("still failing after %d retries: %w", maxRetries, err)
						return
					}
					n, err = seq.Next(ctx)
				}
				got[g] = append(got[g], n)
				if acked.Add(1) == restartAfter {
					close(reached)
				}
			}
		})
	}
	select {
	case <-reached:
		srv.Restart(t, true)
	case <-ctx.Done():
	}
	close(restarted)
	wg.Wait()
	for g, err := range errs {
		require.NoError(t, err, "caller %d", g)
	}
	t.Logf("%d calls failed around the restart", failures.Load())

	var all []uint64
	for _, ns := range got {
		all = append(all, ns...)
	}
	head, err := seq.Peek(ctx)
	require.NoError(t, err)
	assertDistinct(t, all, head, "acknowledged numbers")
	a := auditLedger(t, ctx, v, fleetSeries)
	assertDense(t, a.allocated, head, "ledger allocations")
	// Every acknowledged number is in the ledger (so it survived the crash).
	inLedger := make(map[uint64]bool, len(a.allocated))
	for _, n := range a.allocated {
		inLedger[n] = true
	}
	var lost []uint64
	for _, n := range all {
		if !inLedger[n] {
			lost = append(lost, n)
		}
	}
	assert.Empty(t, firstFew(lost), "acknowledged numbers the ledger lost")
	n, err := seq.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, head+1, n, "Next after the restart")
}

// The many-series fleet: manyProcs processes take numbers of manySeries
// series at once, each series manyPerSeries numbers in all.
const (
	manyProcs     = 8
	manySeries    = 64
	manyPerSeries = 1000
	manyPerProc   = manyPerSeries / manyProcs // numbers of each series per process
	manyConns     = 4                         // connections of each process
)

// envFleetMany, set to the numbers each series gets from this child, makes
// TestFleetManySeriesHelperProcess a member of the many-series fleet.
const envFleetMany = "NOYDB_FLEET_MANY_PER"

// manySeriesName is the name of series s of the many-series fleet.
func manySeriesName(s int) string { return fmt.Sprintf("many-%02d", s) }

// TestFleetManySeriesHelperProcess is a member of the many-series fleet
// when run as a child by TestFleetManySeries (envFleetMany set), and does
// nothing otherwise. One goroutine per series takes that series' numbers
// with Next, all series at once, and prints each on its own line the
// moment it has it: "n NUMBER SERIES".
func TestFleetManySeriesHelperProcess(t *testing.T) {
	perText := os.Getenv(envFleetMany)
	if perText == "" {
		return // not a child: TestFleetManySeries runs this as one
	}
	per, err := strconv.Atoi(perText)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()
	s, err := pgstore.Open(ctx, os.Getenv(envFleetURL), &pgstore.Options{Schema: os.Getenv(envFleetSchema), MaxConns: manyConns})
	require.NoError(t, err)
	defer s.Close()
	v, _ := fleetVaultOn(t, s)
	seqs := make([]*sequence.Sequence, manySeries)
	for i := range seqs {
		seqs[i], err = v.Sequence(manySeriesName(i), sequence.Options{})
		require.NoError(t, err)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, seq := range seqs {
		wg.Go(func() {
			<-start
			for c := range per {
				n, err := seq.Next(ctx)
				if err != nil {
					t.Errorf("series %s, call %d: %v", manySeriesName(i), c, err)
					return
				}
				// One write per line, shorter than PIPE_BUF: it reaches the
				// pipe whole.
				if _, err := fmt.Fprintf(os.Stdout, "n %d %s\n", n, manySeriesName(i)); err != nil {
					t.Errorf("series %s: print: %v", manySeriesName(i), err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
}

// TestFleetManySeries: manyProcs processes, each with its own DB and pool,
// take numbers of manySeries series all at once, manyPerProc of each
// series per process. Every series ends with exactly 1..manyPerSeries, the
// ledger holds exactly one allocation per number, dense and verified, and
// every series audits clean.
func TestFleetManySeries(t *testing.T) {
	dbURL := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()
	schema, v, _ := newFleet(t, dbURL)
	require.Zero(t, manyPerSeries%manyProcs, "the processes share each series evenly")

	began := time.Now()
	children := make([]*fleetChild, manyProcs)
	for i := range children {
		children[i] = startFleetProcess(t, ctx, "TestFleetManySeriesHelperProcess", i, nil,
			envFleetMany+"="+strconv.Itoa(manyPerProc),
			envFleetURL+"="+dbURL,
			envFleetSchema+"="+schema)
	}
	got := make(map[string][]uint64, manySeries)
	for _, c := range children {
		out, err := c.wait()
		require.NoError(t, err, out)
		acks := c.acknowledged()
		require.Len(t, acks, manySeries*manyPerProc, out)
		perSeries := map[string]int{}
		for _, a := range acks {
			got[a.id] = append(got[a.id], a.n)
			perSeries[a.id]++
		}
		for s := range manySeries {
			assert.Equal(t, manyPerProc, perSeries[manySeriesName(s)], "child %d: numbers of %s", c.index, manySeriesName(s))
		}
	}
	require.Len(t, got, manySeries, "series the children took numbers of")
	t.Logf("%d processes took %d numbers of %d series in %v", manyProcs, manySeries*manyPerSeries, manySeries, time.Since(began).Round(time.Millisecond))
	began = time.Now()

	// The ledger, read once: dense, one allocation per number given.
	allocated := make(map[string][]uint64, manySeries)
	var entries uint64
	for e, err := range v.Audit().Read(ctx, 1) {
		require.NoError(t, err, "read the ledger")
		entries++
		require.Equal(t, entries, e.Seq, "ledger positions are dense")
		if assert.Equal(t, ledger.NumberAllocated, e.Kind, "entry %d", e.Seq) {
			allocated[e.Series] = append(allocated[e.Series], e.Number)
		}
	}
	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err, "verify the ledger")
	assert.True(t, rep.OK(), "ledger problem: %v", rep.Problem)
	assert.Equal(t, uint64(manySeries*manyPerSeries), rep.Entries, "Verify: entries")
	assert.Equal(t, uint64(manySeries*manyPerSeries), rep.Head.Seq, "Verify: head")
	assert.Equal(t, uint64(manySeries*manyPerSeries), entries, "one ledger entry per number")
	assert.Len(t, allocated, manySeries, "series the ledger allocates")

	// Every series: exactly 1..manyPerSeries given and allocated, and a
	// clean audit. Each audit reads the whole ledger (64,000 entries): a
	// few run at once. Under -race, where decoding is several times slower
	// (all 64 took 37 s, measured), every 8th series is audited; the
	// ledger's allocations of every series are checked exactly above
	// either way.
	auditStep := 1
	if race.Enabled {
		auditStep = 8
	}
	seqs := make([]*sequence.Sequence, manySeries)
	for s := range seqs {
		name := manySeriesName(s)
		assertDense(t, got[name], manyPerSeries, "numbers the children got of "+name)
		assertDense(t, allocated[name], manyPerSeries, "ledger allocations of "+name)
		seqs[s], err = v.Sequence(name, sequence.Options{})
		require.NoError(t, err)
		head, err := seqs[s].Peek(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(manyPerSeries), head, "Peek of %s", name)
	}
	audits := make([]sequence.AuditReport, manySeries)
	errs := make([]error, manySeries)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 4 {
		wg.Go(func() {
			for s := int(next.Add(int64(auditStep))) - auditStep; s < manySeries; s = int(next.Add(int64(auditStep))) - auditStep {
				audits[s], errs[s] = seqs[s].Audit(ctx)
			}
		})
	}
	wg.Wait()
	t.Logf("checked the ledger and audited %d series in %v", manySeries/auditStep, time.Since(began).Round(time.Millisecond))
	for s := 0; s < manySeries; s += auditStep {
		a, name := audits[s], manySeriesName(s)
		if !assert.NoError(t, errs[s], "Audit of %s", name) {
			continue
		}
		assert.Equal(t, uint64(manyPerSeries), a.Head, "Audit of %s: head", name)
		assert.Equal(t, manyPerSeries, a.Unbound, "Audit of %s: every number issued by Next", name)
		assert.Zero(t, a.Bound+a.Missing+a.Voided+a.Seeded+a.Orphaned, "Audit of %s: bound, missing, voided, seeded or orphaned", name)
	}
}
