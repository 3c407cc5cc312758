package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/vault"
)

// Three devices (three DBs on three file store handles of one folder) write
// stubs through their handles while each runs passes over and over. At the
// end, after one more pass, the stubs carry exactly 1..K, each its own, the
// ledger verifies, the series audits clean, and within each batch the
// numbers follow provisional order.
func TestNumberedThreeDevicesOneFolder(t *testing.T) {
	total := 1500
	if testing.Short() {
		total = 300
	}
	ctx := context.Background()
	dir := t.TempDir()
	type device struct {
		v *vault.Vault
		c *vault.Collection[Stub]
		h *vault.Numbered[Stub]
	}
	devices := make([]device, 3)
	for i := range devices {
		v := openVault(t, openDB(t, openFileStore(t, dir), "alice", "s3cret"), "books")
		c, h := stubsOf(t, v)
		require.False(t, h.Online())
		devices[i] = device{v, c, h}
	}
	var ids []string
	for i := range total {
		ids = append(ids, fmt.Sprintf("d%d-%05d", i%3, i))
	}
	var (
		writing, passing sync.WaitGroup
		stop             = make(chan struct{})
		passes, busy     atomic.Int64
		errs             = make(chan error, 2*len(devices))
	)
	for d, dev := range devices {
		writing.Go(func() {
			for i := d; i < total; i += len(devices) {
				if _, err := dev.h.Put(ctx, ids[i], Stub{Desk: fmt.Sprint("desk-", d), Total: i}); err != nil {
					errs <- fmt.Errorf("device %d: put: %w", d, err)
					return
				}
			}
		})
		passing.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := dev.h.Settle(ctx)
				switch {
				case errors.Is(err, numbering.ErrPassRunning):
					busy.Add(1)
				case err != nil:
					errs <- fmt.Errorf("device %d: pass: %w", d, err)
					return
				default:
					passes.Add(1)
				}
				// Pacing, not synchronisation: a pass lists the folder, so
				// back-to-back passes would each find a record or two.
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	writing.Wait()
	close(stop)
	passing.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	rep, err := devices[1].h.Settle(ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.Waiting)
	t.Logf("%d passes ran during the writes, %d found another running; the last numbered %d", passes.Load(), busy.Load(), rep.Assigned)

	d := devices[2]
	checkStubs(t, d.v, d.c, d.h, ids)
	pending, err := d.h.Series().Pending(ctx)
	require.NoError(t, err)
	assert.Zero(t, pending)
	type got struct {
		n uint64
		p string
	}
	batches := map[uint64][]got{}
	for a, err := range d.h.Series().Assignments(ctx) {
		require.NoError(t, err)
		batches[a.Batch] = append(batches[a.Batch], got{a.Number, a.Provisional})
	}
	for b, as := range batches {
		slices.SortFunc(as, func(x, y got) int { return int(x.n) - int(y.n) })
		for i := 1; i < len(as); i++ {
			require.Less(t, as[i-1].p, as[i].p, "batch %d: numbers follow provisional order", b)
		}
	}
}

// numberedCrashEnv, when set to "<folder><list separator><round>", makes
// TestNumberedCrashChild write stubs through the handle and run passes
// until it is killed; numberedKillEnv, when k > 0, makes it SIGKILL itself
// right after the k-th write its store accepted (anywhere: between a
// handoff entry and its record, between a stamp and its ledger entry, …).
const (
	numberedCrashEnv = "NOYDB_NUMBERED_CRASH_CHILD"
	numberedKillEnv  = "NOYDB_NUMBERED_KILL_AT"
)

// killStore is a file store that kills its process right after its at-th
// accepted write. It keeps the file store's Dir and lock methods.
type killStore struct {
	*filestore.Store
	writes atomic.Int64
	at     int64
}

func (k *killStore) wrote() {
	if k.at > 0 && k.writes.Add(1) == k.at {
		killSelf()
	}
}

func (k *killStore) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	v, err := k.Store.Put(ctx, key, value)
	if err == nil {
		k.wrote()
	}
	return v, err
}

func (k *killStore) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	v, err := k.Store.CompareAndSwap(ctx, key, expected, value)
	if err == nil {
		k.wrote()
	}
	return v, err
}

func (k *killStore) Delete(ctx context.Context, key string) error {
	err := k.Store.Delete(ctx, key)
	if err == nil {
		k.wrote()
	}
	return err
}

// TestNumberedCrashChild is the child of TestNumberedSurvivesKill: two
// writers put stubs through the handle, printing "put ID" once each Put
// has returned, while a third goroutine runs passes, printing "pass". It
// runs until it is killed.
func TestNumberedCrashChild(t *testing.T) {
	spec := os.Getenv(numberedCrashEnv)
	if spec == "" {
		t.Skip("runs only as the child process of TestNumberedSurvivesKill")
	}
	dir, roundText, ok := strings.Cut(spec, string(os.PathListSeparator))
	if !ok {
		t.Fatalf("bad %s", numberedCrashEnv)
	}
	round, err := strconv.Atoi(roundText)
	if err != nil {
		t.Fatal(err)
	}
	at, _ := strconv.ParseInt(os.Getenv(numberedKillEnv), 10, 64)
	ctx := context.Background()
	fst, err := filestore.Open(dir, &filestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	st := &killStore{Store: fst, at: at}
	db, err := noydb.Open(ctx, noydb.Config{User: "alice", Secret: []byte("s3cret"), Store: st,
		KDF: cheapKDF, InsecureAllowWeakKDF: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.OpenVault(ctx, "books")
	if err != nil {
		t.Fatal(err)
	}
	_, h := stubsOf(t, v)
	var mu sync.Mutex
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
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for i := range bound {
				id := fmt.Sprintf("r%02d-g%d-%05d", round, g, i)
				if _, err := h.Put(ctx, id, Stub{Desk: fmt.Sprint("g", g), Total: i}); err != nil {
					fail(err)
				}
				say("put %s", id)
			}
		})
	}
	wg.Go(func() {
		for range bound {
			if _, err := h.Settle(ctx); err != nil && !errors.Is(err, numbering.ErrPassRunning) {
				fail(err)
			}
			say("pass")
		}
	})
	wg.Wait()
}

// A child writing stubs through the handle on a file store while running
// passes is killed with SIGKILL, 30 rounds on one folder: even rounds by
// the parent after some acknowledgements, odd rounds by itself right after
// a random write its store accepted (so inside a handoff or a pass). After
// every round one more pass runs, and then: every acknowledged stub is
// there, every stub in the folder carries exactly one number, the numbers
// are exactly 1..the stubs' count, no stub's number changed since the last
// round, nothing is pending but handoff entries whose record never landed
// (at most one per writer and kill), the ledger verifies and the series
// audits clean.
func TestNumberedSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes: slow")
	}
	const rounds = 30
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := t.TempDir()
	{ // The vault, created before any child opens it.
		db := openDB(t, openFileStore(t, dir), "alice", "s3cret")
		openVault(t, db, "books")
		require.NoError(t, db.Close())
	}
	numbers := map[string]uint64{} // every stub's number, as of the last round
	acked := map[string]bool{}
	for round := range rounds {
		killAfter, killAt := 5+rng.IntN(60), 0
		if round%2 == 1 {
			killAfter, killAt = 0, 3+rng.IntN(400)
		}
		lines := runNumberedCrashChild(t, dir, round, killAfter, killAt)
		for _, line := range lines {
			f := strings.Fields(line)
			require.NotEmpty(t, f)
			switch f[0] {
			case "put":
				acked[f[1]] = true
			case "pass":
			default:
				t.Fatalf("round %d: child said %q", round, line)
			}
		}

		st := openFileStore(t, dir)
		db := openDB(t, st, "alice", "s3cret")
		v := openVault(t, db, "books")
		c, h := stubsOf(t, v)
		ctx := context.Background()
		rep, err := h.Settle(ctx)
		require.NoError(t, err, "round %d: the pass after the kill", round)
		var ids []string
		for r, err := range c.List(ctx) {
			require.NoError(t, err)
			ids = append(ids, r.ID)
		}
		for id := range acked {
			require.Contains(t, ids, id, "round %d: acknowledged stub %s is there", round, id)
		}
		byID := checkStubs(t, v, c, h, ids)
		for id, n := range numbers {
			require.Equal(t, n, byID[id], "round %d: %s keeps its number", round, id)
		}
		numbers = byID
		pending, err := h.Series().Pending(ctx)
		require.NoError(t, err)
		assert.Equal(t, rep.Waiting, pending, "round %d: only entries waiting for a record that never landed", round)
		assert.LessOrEqual(t, pending, 2*(round+1), "round %d: at most one per writer and kill", round)
		require.NoError(t, db.Close())
		require.NoError(t, st.Close())
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, seed)
		}
		t.Logf("round %d: %d lines, %d stubs numbered, %d resumed by the pass after the kill, %d waiting",
			round, len(lines), len(ids), rep.Resumed, pending)
	}
}

// runNumberedCrashChild starts the child for round on dir, kills it once
// it printed killAfter lines (killAfter > 0) or lets it kill itself after
// killAt writes, and returns every line it printed.
func runNumberedCrashChild(t *testing.T, dir string, round, killAfter, killAt int) []string {
	t.Helper()
	return runKilledChild(t, "TestNumberedCrashChild", round, killAfter,
		numberedCrashEnv+"="+dir+string(os.PathListSeparator)+strconv.Itoa(round),
		numberedKillEnv+"="+strconv.Itoa(killAt))
}
