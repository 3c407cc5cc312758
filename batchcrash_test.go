package noydb_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// batchCrashChildEnv, when set to "<badger dir><list separator><round>",
// makes TestBatchCrashChild write until it is killed. batchCrashCommitsEnv,
// when set to k > 0, makes the child send itself SIGKILL the moment the
// store has committed its k-th transaction, before the SDK has returned
// from it: writes committed and never acknowledged.
const (
	batchCrashChildEnv   = "NOYDB_BATCH_CRASH_CHILD"
	batchCrashCommitsEnv = "NOYDB_BATCH_CRASH_COMMITS"
)

// The work of one child, all at once on one vault.
const (
	crashRecordWriters = 4 // goroutines putting, overwriting and deleting records
	crashNextCallers   = 4 // goroutines calling Next, each across every Next series
	crashNumberers     = 2 // goroutines writing records with PutNumbered
	crashRecords       = "recs"
	crashNumbered      = "numbered"
	crashNumberSeries  = "p" // the series PutNumbered takes from, and only it
)

// crashNextSeries are the series Next is called on.
var crashNextSeries = []string{"a", "b", "c", "d"}

// crashRecord is a record of the crash test: which write made it.
type crashRecord struct {
	Round, G, I, V int
}

// crashNumberedRecord is a record written with PutNumbered.
type crashNumberedRecord struct {
	Round, G, I int
	Number      uint64
}

// crashRecordID and crashNumberedID name the i-th record of goroutine g
// in round: distinct in every round, so the checks are exact.
func crashRecordID(round, g, i int) string   { return fmt.Sprintf("r%d-g%d-%d", round, g, i) }
func crashNumberedID(round, g, i int) string { return fmt.Sprintf("p%d-g%d-%d", round, g, i) }

// TestBatchCrashChild is the child of TestBatchedWritesSurviveKill. On
// durable badger, all at once: record writers put each of their records
// (V 1), put it again (V 2) and delete every other one; Next callers take
// numbers of series a..d in turn; numberers write records with
// PutNumbered on series p. Each outcome is printed on its own line once
// the call has returned:
//
//	put1 ID | put2 ID | del ID | next SERIES N | pn ID N
//
// It runs until the parent kills it.
func TestBatchCrashChild(t *testing.T) {
	spec := os.Getenv(batchCrashChildEnv)
	if spec == "" {
		t.Skip("runs only as the child process of TestBatchedWritesSurviveKill")
	}
	dir, roundText, ok := strings.Cut(spec, string(os.PathListSeparator))
	if !ok {
		t.Fatalf("bad %s", batchCrashChildEnv)
	}
	round, err := strconv.Atoi(roundText)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bst, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var st stores.Store = bst
	if k, _ := strconv.ParseInt(os.Getenv(batchCrashCommitsEnv), 10, 64); k > 0 {
		var commits atomic.Int64
		st = faultstore.New(bst, faultstore.Options{After: func(op faultstore.Op, _ string) error {
			if op == faultstore.OpUpdate && commits.Add(1) == k {
				killSelf()
			}
			return nil
		}})
	}
	db, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("s"), Store: st,
		KDF: cheapKDF, InsecureAllowWeakKDF: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.OpenVault(ctx, "books")
	if err != nil {
		t.Fatal(err)
	}
	var next []*sequence.Sequence
	for _, name := range crashNextSeries {
		q, err := v.Sequence(name, sequence.Options{})
		if err != nil {
			t.Fatal(err)
		}
		next = append(next, q)
	}
	pseq, err := v.Sequence(crashNumberSeries, sequence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := vault.CollectionOf[crashRecord](v, crashRecords)
	numbered := vault.CollectionOf[crashNumberedRecord](v, crashNumbered)

	var mu sync.Mutex
	// say prints one line in one write: the parent reads every line
	// printed before the kill, whole.
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprintf(os.Stdout, format+"\n", args...); err != nil {
			os.Exit(3)
		}
	}
	fail := func(err error) {
		say("error %v", err)
		os.Exit(2)
	}
	const bound = 100_000 // in case the parent is gone
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range crashRecordWriters {
		wg.Go(func() {
			<-start
			for i := range bound {
				id := crashRecordID(round, g, i)
				for ver := 1; ver <= 2; ver++ {
					if err := recs.Put(ctx, id, crashRecord{Round: round, G: g, I: i, V: ver}); err != nil {
						fail(err)
					}
					say("put%d %s", ver, id)
				}
				if i%2 == 0 {
					if err := recs.Delete(ctx, id); err != nil {
						fail(err)
					}
					say("del %s", id)
				}
			}
		})
	}
	for g := range crashNextCallers {
		wg.Go(func() {
			<-start
			for i := range bound {
				s := (g + i) % len(next)
				n, err := next[s].Next(ctx)
				if err != nil {
					fail(err)
				}
				say("next %s %d", crashNextSeries[s], n)
			}
		})
	}
	for g := range crashNumberers {
		wg.Go(func() {
			<-start
			for i := range bound {
				id := crashNumberedID(round, g, i)
				r, err := numbered.PutNumbered(ctx, id, pseq, func(s sequence.Serial) (crashNumberedRecord, error) {
					return crashNumberedRecord{Round: round, G: g, I: i, Number: s.N}, nil
				})
				if err != nil {
					fail(err)
				}
				say("pn %s %d", id, r.Number)
			}
		})
	}
	close(start)
	wg.Wait()
}

// crashGuard bounds one child's run, so a child that hangs fails the test
// instead of hanging it; it is never used to assert how long anything takes.
const crashGuard = 2 * time.Minute

// A child process writes records, numbers of four series and numbered
// records all at once on durable badger, printing each write once it is
// acknowledged, and is killed with SIGKILL at a random moment after some
// acknowledgements: 50 rounds on the same folder, each round a new child
// on the store and vault as the last kill left them. After every round:
// every acknowledged write is there (a record put is readable with its
// value, a deleted one is gone), a write in flight at the kill is either
// wholly there or wholly absent with its ledger entry, no number was
// acknowledged twice in any round, every series' ledger allocations are
// exactly 1..its counter, the ledger verifies and every series audits
// clean (numbers taken by a caller killed before its acknowledgement are
// in the ledger, unbound).
func TestBatchedWritesSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes: slow")
	}
	const rounds = 50
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	{ // The vault, created before any child opens it.
		st := openBadger(t, dir)
		db, _ := openSession(t, st, "")
		require.NoError(t, db.Close())
		require.NoError(t, st.Close())
	}
	m := newCrashModel()
	landedAll := 0
	for round := range rounds {
		// Even rounds: the parent kills the child once it has read
		// killAfter acknowledgements, wherever its writes then are. Odd
		// rounds: the child kills itself just after a commit, before the
		// writes in it are acknowledged.
		killAfter, selfKill := 5+rng.IntN(120), 0
		if round%2 == 1 {
			killAfter, selfKill = 0, 5+rng.IntN(40)
		}
		lines := runBatchCrashChild(t, dir, round, killAfter, selfKill)
		require.GreaterOrEqual(t, len(lines), killAfter, "round %d: acknowledgements before the kill", round)
		acks := parseCrashAcks(t, round, lines)

		st := openBadger(t, dir)
		db, v := openSession(t, st, "")
		landed, unacked := m.check(t, round, v, acks)
		landedAll += landed
		require.NoError(t, db.Close())
		require.NoError(t, st.Close())
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, seed)
		}
		t.Logf("round %d: %d acknowledgements, %d record writes landed unacknowledged; in all %d ledger entries, %d numbers never acknowledged",
			round, len(lines), landed, m.entries, unacked)
	}
	t.Logf("%d record writes in flight at a kill were found committed", landedAll)
}

// runBatchCrashChild starts the child for round on dir, kills it with
// SIGKILL once it has acknowledged killAfter writes (killAfter > 0) or
// lets it kill itself after selfKill commits, and returns every line it
// printed.
func runBatchCrashChild(t *testing.T, dir string, round, killAfter, selfKill int) []string {
	t.Helper()
	return runKilledChild(t, "TestBatchCrashChild", round, killAfter,
		batchCrashChildEnv+"="+dir+string(os.PathListSeparator)+strconv.Itoa(round),
		batchCrashCommitsEnv+"="+strconv.Itoa(selfKill))
}

// runKilledChild runs the test named test of this binary as a child with
// env added, kills it with SIGKILL once it has printed killAfter lines
// (killAfter > 0; else it must kill itself), checks that it died of SIGKILL
// (a child still running after crashGuard fails the test), and returns
// every line it printed.
func runKilledChild(t *testing.T, test string, round, killAfter int, env ...string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	var hung atomic.Bool
	guard := time.AfterFunc(crashGuard, func() {
		hung.Store(true)
		_ = cmd.Process.Kill()
	})
	defer guard.Stop()
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if killAfter > 0 && len(lines) == killAfter {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		}
	}
	require.NoError(t, sc.Err())
	err = cmd.Wait()
	require.False(t, hung.Load(), "round %d: the child ran for %v without being killed; stderr:\n%s", round, crashGuard, stderr.String())
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "round %d: the child must die of SIGKILL; it printed:\n%s\nstderr:\n%s",
		round, strings.Join(lines, "\n"), stderr.String())
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"round %d: child: %v; last lines: %q\nstderr:\n%s", round, err, lines[max(0, len(lines)-5):], stderr.String())
	return lines
}

// crashAcks is what one child acknowledged.
type crashAcks struct {
	round    int
	recLast  map[string]int    // record id → last acknowledged write: 1 put V 1, 2 put V 2, 3 delete
	recMaxI  []int             // per record writer: the highest i acknowledged, -1 for none
	numbered map[string]uint64 // numbered record id → its number
	pnMaxI   []int             // per numberer: the highest i acknowledged, -1 for none
	numbers  map[string][]uint64
}

// crashDelete is the last write of a deleted record in crashAcks.recLast.
const crashDelete = 3

func parseCrashAcks(t *testing.T, round int, lines []string) crashAcks {
	t.Helper()
	a := crashAcks{
		round:    round,
		recLast:  map[string]int{},
		recMaxI:  []int{-1, -1, -1, -1},
		numbered: map[string]uint64{},
		pnMaxI:   []int{-1, -1},
		numbers:  map[string][]uint64{},
	}
	require.Len(t, a.recMaxI, crashRecordWriters)
	require.Len(t, a.pnMaxI, crashNumberers)
	for _, line := range lines {
		f := strings.Fields(line)
		require.NotEmpty(t, f, "round %d: empty line", round)
		switch f[0] {
		case "put1", "put2", "del":
			require.Len(t, f, 2, "round %d: %q", round, line)
			r, g, i := parseCrashID(t, "r", f[1])
			require.Equal(t, round, r, "round %d: %q", round, line)
			op := map[string]int{"put1": 1, "put2": 2, "del": crashDelete}[f[0]]
			require.Equal(t, op-1, a.recLast[f[1]], "round %d: %q follows the write before it", round, line)
			a.recLast[f[1]] = op
			a.recMaxI[g] = max(a.recMaxI[g], i)
		case "next", "pn":
			require.Len(t, f, 3, "round %d: %q", round, line)
			n, err := strconv.ParseUint(f[2], 10, 64)
			require.NoError(t, err, "round %d: %q", round, line)
			if f[0] == "next" {
				a.numbers[f[1]] = append(a.numbers[f[1]], n)
				continue
			}
			r, g, i := parseCrashID(t, "p", f[1])
			require.Equal(t, round, r, "round %d: %q", round, line)
			_, twice := a.numbered[f[1]]
			require.False(t, twice, "round %d: %q acknowledged twice", round, line)
			a.numbered[f[1]] = n
			a.numbers[crashNumberSeries] = append(a.numbers[crashNumberSeries], n)
			a.pnMaxI[g] = max(a.pnMaxI[g], i)
		default:
			t.Fatalf("round %d: the child said %q", round, line)
		}
	}
	return a
}

// parseCrashID splits an id made by crashRecordID or crashNumberedID.
func parseCrashID(t *testing.T, prefix, id string) (round, g, i int) {
	t.Helper()
	_, err := fmt.Sscanf(id, prefix+"%d-g%d-%d", &round, &g, &i)
	require.NoError(t, err, "id %q", id)
	require.Equal(t, crashRecordID(round, g, i)[1:], id[1:], "id %q", id)
	return round, g, i
}

// crashModel is what the parent knows across rounds.
type crashModel struct {
	recs     map[string]int               // records of earlier rounds as found after their round: id → V
	numbered map[string]uint64            // numbered records of earlier rounds: id → number
	numbers  map[string]map[uint64]string // series → every number acknowledged → the round that did
	entries  uint64                       // ledger entries at the last check
}

func newCrashModel() *crashModel {
	m := &crashModel{recs: map[string]int{}, numbered: map[string]uint64{}, numbers: map[string]map[uint64]string{}}
	for _, s := range append([]string{crashNumberSeries}, crashNextSeries...) {
		m.numbers[s] = map[uint64]string{}
	}
	return m
}

// recordMayBe returns the versions (0: absent) record id of this round may
// have: those of its last acknowledged write and of the write that may have
// been in flight after it.
func (a crashAcks) recordMayBe(g, i int) []int {
	id := crashRecordID(a.round, g, i)
	switch a.recLast[id] {
	case 1:
		return []int{1, 2}
	case 2:
		if i%2 == 0 {
			return []int{2, 0}
		}
		return []int{2}
	case crashDelete:
		return []int{0}
	}
	// Never acknowledged: its first put may have been in flight if it is
	// the writer's next record and the one before is finished.
	if i == a.recMaxI[g]+1 {
		if a.recMaxI[g] < 0 {
			return []int{0, 1}
		}
		prev := i - 1
		last := a.recLast[crashRecordID(a.round, g, prev)]
		if (prev%2 == 0 && last == crashDelete) || (prev%2 == 1 && last == 2) {
			return []int{0, 1}
		}
	}
	return []int{0}
}

// ledgerLast is the last ledger entry of a record.
type ledgerLast struct {
	kind ledger.Kind
	rev  uint64
}

// check reads the store as the kill of round left it and holds it to what
// every child acknowledged, then settles the writes of round that were in
// flight at the kill as found.
//
// It returns how many writes of round were found committed though never
// acknowledged (in flight at the kill), and how many numbers of all rounds
// the ledger holds that no child acknowledged.
func (m *crashModel) check(t *testing.T, round int, v *vault.Vault, a crashAcks) (landed int, unacked uint64) {
	t.Helper()
	ctx := context.Background()

	// No number acknowledged twice, in this round or across rounds.
	for s, ns := range a.numbers {
		seen, known := m.numbers[s]
		require.True(t, known, "round %d: numbers of an unknown series %q", round, s)
		for _, n := range ns {
			if first, twice := seen[n]; twice {
				t.Errorf("round %d: number %d of %s acknowledged again (first in %s)", round, n, s, first)
			}
			seen[n] = fmt.Sprintf("round %d", round)
		}
	}

	// The ledger, read whole: dense, and verified.
	last := map[string]ledgerLast{} // "collection/id" → its last entry
	allocated := map[string][]uint64{}
	boundBy := map[uint64]string{}
	var entries uint64
	for e, err := range v.Audit().Read(ctx, 1) {
		require.NoError(t, err, "round %d: read the ledger", round)
		entries++
		require.Equal(t, entries, e.Seq, "round %d: ledger positions are dense", round)
		switch e.Kind {
		case ledger.NumberAllocated:
			allocated[e.Series] = append(allocated[e.Series], e.Number)
		case ledger.RecordPut, ledger.RecordDelete:
			last[e.Collection+"/"+e.ID] = ledgerLast{e.Kind, e.Revision}
			if e.Series == "" {
				assert.Equal(t, crashRecords, e.Collection, "round %d: entry %d", round, e.Seq)
				continue
			}
			assert.Equal(t, crashNumberSeries, e.Series, "round %d: entry %d", round, e.Seq)
			assert.Equal(t, crashNumbered, e.Collection, "round %d: entry %d", round, e.Seq)
			if other, twice := boundBy[e.Number]; twice {
				t.Errorf("round %d: number %d put on %s and %s", round, e.Number, other, e.ID)
			}
			boundBy[e.Number] = e.ID
		default:
			t.Errorf("round %d: entry %d: unexpected %v", round, e.Seq, e.Kind)
		}
	}
	rep, err := v.Audit().Verify(ctx)
	require.NoError(t, err, "round %d: verify", round)
	assert.True(t, rep.OK(), "round %d: ledger: %v", round, rep.Problem)
	assert.Equal(t, entries, rep.Entries, "round %d: Verify saw the entries Read did", round)
	assert.Equal(t, entries, rep.Head.Seq, "round %d: ledger head", round)
	assert.GreaterOrEqual(t, entries, m.entries, "round %d: the ledger shrank", round)
	m.entries = entries

	// Every series: its allocations exactly 1..counter, every number
	// acknowledged among them, and a clean audit.
	for s, acked := range m.numbers {
		q := mustSeq(t, v, s)
		head, err := q.Peek(ctx)
		require.NoError(t, err, "round %d: Peek of %s", round, s)
		assertOneTo(t, allocated[s], head, fmt.Sprintf("round %d: ledger allocations of %s", round, s))
		for n := range acked {
			assert.LessOrEqual(t, n, head, "round %d: acknowledged number of %s above its counter", round, s)
		}
		unacked += head - min(head, uint64(len(acked)))
		rep, err := q.Audit(ctx)
		require.NoError(t, err, "round %d: Audit of %s", round, s)
		assert.Equal(t, head, rep.Head, "round %d: Audit of %s: head", round, s)
		bound, unbound := 0, int(head)
		if s == crashNumberSeries {
			// A numbered record commits with its number: none unbound.
			bound, unbound = int(head), 0
		}
		assert.Equal(t, bound, rep.Bound, "round %d: Audit of %s: bound", round, s)
		assert.Equal(t, unbound, rep.Unbound, "round %d: Audit of %s: unbound", round, s)
		assert.Zero(t, rep.Missing+rep.Voided+rep.Seeded+rep.Orphaned, "round %d: Audit of %s: missing, voided, seeded or orphaned", round, s)
	}

	// Records: each as its last acknowledged write left it, or as the
	// write in flight after it made it, with its ledger entry.
	found := map[string]int{}
	for r, err := range vault.CollectionOf[crashRecord](v, crashRecords).List(ctx) {
		require.NoError(t, err, "round %d: list records", round)
		rr, g, i := parseCrashID(t, "r", r.ID)
		found[r.ID] = r.Value.V
		assert.Equal(t, crashRecord{Round: rr, G: g, I: i, V: r.Value.V}, r.Value, "round %d: record %s", round, r.ID)
		assert.Equal(t, uint64(r.Value.V), r.Revision, "round %d: record %s: revision", round, r.ID)
		assert.Equal(t, ledgerLast{ledger.RecordPut, r.Revision}, last[crashRecords+"/"+r.ID], "round %d: record %s: its last ledger entry", round, r.ID)
		switch {
		case rr < round:
			assert.Equal(t, m.recs[r.ID], r.Value.V, "round %d: record %s of round %d changed", round, r.ID, rr)
		case rr == round:
			assert.Contains(t, a.recordMayBe(g, i), r.Value.V, "round %d: record %s (last acknowledged write: %d)", round, r.ID, a.recLast[r.ID])
			if r.Value.V != a.recLast[r.ID] {
				landed++
			}
		default:
			t.Errorf("round %d: record %s of a later round", round, r.ID)
		}
	}
	for id, ver := range m.recs {
		assert.Contains(t, found, id, "round %d: record %s (V %d) of an earlier round lost", round, id, ver)
	}
	for id := range a.recLast {
		_, g, i := parseCrashID(t, "r", id)
		if _, ok := found[id]; !ok {
			assert.Contains(t, a.recordMayBe(g, i), 0, "round %d: acknowledged record %s lost (last write: %d)", round, id, a.recLast[id])
			if a.recLast[id] != crashDelete {
				landed++
			}
		}
	}
	for key, e := range last {
		id, ok := strings.CutPrefix(key, crashRecords+"/")
		if !ok {
			continue
		}
		_, present := found[id]
		assert.Equal(t, e.kind == ledger.RecordPut, present, "round %d: record %s: last ledger entry %v", round, id, e.kind)
	}
	for id, ver := range found {
		m.recs[id] = ver
	}

	// Numbered records: each acknowledged one with its number, and at most
	// one more per numberer, the one in flight at the kill.
	numbered := map[string]uint64{}
	for r, err := range vault.CollectionOf[crashNumberedRecord](v, crashNumbered).List(ctx) {
		require.NoError(t, err, "round %d: list numbered records", round)
		rr, g, i := parseCrashID(t, "p", r.ID)
		numbered[r.ID] = r.Value.Number
		assert.Equal(t, crashNumberedRecord{Round: rr, G: g, I: i, Number: r.Value.Number}, r.Value, "round %d: record %s", round, r.ID)
		assert.Equal(t, uint64(1), r.Revision, "round %d: record %s: revision", round, r.ID)
		assert.Equal(t, ledgerLast{ledger.RecordPut, 1}, last[crashNumbered+"/"+r.ID], "round %d: record %s: its ledger entry", round, r.ID)
		assert.Equal(t, r.ID, boundBy[r.Value.Number], "round %d: the ledger binds number %d", round, r.Value.Number)
		switch {
		case rr < round:
			assert.Equal(t, m.numbered[r.ID], r.Value.Number, "round %d: record %s of round %d changed", round, r.ID, rr)
		case rr == round:
			if n, acked := a.numbered[r.ID]; acked {
				assert.Equal(t, n, r.Value.Number, "round %d: record %s: the number acknowledged", round, r.ID)
			} else {
				assert.Equal(t, a.pnMaxI[g]+1, i, "round %d: record %s was never acknowledged nor in flight", round, r.ID)
				landed++
			}
		default:
			t.Errorf("round %d: record %s of a later round", round, r.ID)
		}
	}
	for id := range m.numbered {
		assert.Contains(t, numbered, id, "round %d: numbered record %s of an earlier round lost", round, id)
	}
	for id := range a.numbered {
		assert.Contains(t, numbered, id, "round %d: acknowledged numbered record %s lost", round, id)
	}
	assert.Len(t, boundBy, len(numbered), "round %d: numbers the ledger binds, one per numbered record", round)
	for id, n := range numbered {
		m.numbered[id] = n
	}
	return landed, unacked
}
