package pgstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	osexec "os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/stores/storetest"
	"github.com/noydb-go/noydb/vault"
)

// Environment of a lock child (TestLockHelperProcess).
const (
	envLockMode   = "NOYDB_LOCK_MODE" // "hold" or "pass"; unset: not a child
	envLockURL    = "NOYDB_LOCK_URL"
	envLockSchema = "NOYDB_LOCK_SCHEMA"
	envLockName   = "NOYDB_LOCK_NAME" // "hold": the lock's name
)

// The series the pass race numbers, and how many records it has.
const (
	raceSeries  = "receipts"
	raceRecords = 200
	raceProcs   = 8
)

var raceOpts = numbering.Options{Collection: fleetCollection, Field: "Number"}

// TestLockHelperProcess is a lock child when run by the tests below
// (envLockMode set), and does nothing otherwise.
//
//   - "hold": take the lock envLockName, print "locked", and wait for
//     standard input to close (or to be killed).
//   - "pass": open the fleet's vault and run a numbering pass of
//     raceSeries. The winner prints "locked" at its first store call after
//     the lock and waits for standard input to close before it goes on,
//     then prints "done ASSIGNED"; a pass that finds the series locked
//     prints "running".
func TestLockHelperProcess(t *testing.T) {
	mode := os.Getenv(envLockMode)
	if mode == "" {
		return // not a child
	}
	ctx, cancel := context.WithTimeout(context.Background(), fleetGuard)
	defer cancel()
	s, err := pgstore.Open(ctx, os.Getenv(envLockURL), &pgstore.Options{Schema: os.Getenv(envLockSchema), MaxConns: 4})
	require.NoError(t, err)
	defer s.Close()
	switch mode {
	case "hold":
		unlock, err := s.Lock(ctx, os.Getenv(envLockName))
		require.NoError(t, err)
		defer unlock()
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "pass":
		gs := &gatedStore{Store: s}
		db, v, err := openFleetVault(ctx, gs)
		require.NoError(t, err)
		defer db.Close()
		//lint:ignore SA1019 the race needs passes on a store with compare-and-swap, where only Numbering defers
		//lint:ignore SA1019 the race needs passes on a store with compare-and-swap, where only Numbering defers
		series, err := v.Numbering(raceSeries, raceOpts)
		require.NoError(t, err)
		gs.armed = true
		rep, err := series.RunPass(ctx)
		if errors.Is(err, numbering.ErrPassRunning) {
			fmt.Println("running")
			return
		}
		require.NoError(t, err)
		fmt.Println("done", rep.Assigned)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

// gatedStore is a pgstore.Store (its Locker and Transactor included) whose
// first data call once armed prints "locked" and waits for standard input
// to close: in a child running a pass, that call comes after the pass lock.
type gatedStore struct {
	*pgstore.Store
	armed bool // set before the pass, by the one goroutine that runs it
	once  sync.Once
}

func (g *gatedStore) gate() {
	if g.armed {
		g.once.Do(func() {
			fmt.Println("locked")
			_, _ = io.Copy(io.Discard, os.Stdin)
		})
	}
}

// gateKey is gate for a call on key, but for the read of the vault's
// current key generation, which a pass makes before it takes the lock.
func (g *gatedStore) gateKey(key string) {
	if !strings.HasSuffix(key, "/_generation") {
		g.gate()
	}
}

func (g *gatedStore) Get(ctx context.Context, key string) (stores.Item, error) {
	g.gateKey(key)
	return g.Store.Get(ctx, key)
}

func (g *gatedStore) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	g.gate()
	return g.Store.Put(ctx, key, value)
}

func (g *gatedStore) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	g.gate()
	return g.Store.CompareAndSwap(ctx, key, expected, value)
}

func (g *gatedStore) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	g.gate()
	return g.Store.List(ctx, prefix)
}

func (g *gatedStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	g.gate()
	return g.Store.Update(ctx, fn)
}

// lockChild is a running lock child.
type lockChild struct {
	cmd   *osexec.Cmd
	out   *bufio.Scanner
	stdin io.WriteCloser
}

func startLockChild(t *testing.T, mode, dbURL, schema string, env ...string) *lockChild {
	t.Helper()
	cmd := osexec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$", "-test.count=1")
	// A binary built with -race sleeps a second at exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), append([]string{envLockMode + "=" + mode, envLockURL + "=" + dbURL,
		envLockSchema + "=" + schema, "GORACE=" + gorace}, env...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &lockChild{cmd: cmd, out: bufio.NewScanner(stdout), stdin: stdin}
	t.Cleanup(func() {
		_ = stdin.Close()
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// line returns the child's next line of output, or "" at its end.
func (c *lockChild) line() string {
	if c.out.Scan() {
		return c.out.Text()
	}
	return ""
}

// wait reads the child's output to its end and waits for it to exit.
func (c *lockChild) wait() error {
	for c.out.Scan() {
	}
	return c.cmd.Wait()
}

// schemaOf opens a store on a fresh schema of the test server and returns
// it with the schema's name.
func schemaOf(t *testing.T) (*pgstore.Store, string, string) {
	t.Helper()
	dbURL := pgtest.URL(t)
	schema := pgtest.Schema(t)
	s, err := pgstore.Open(context.Background(), dbURL, &pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s, dbURL, schema
}

// TestLockerDeath: the advisory lock of a process killed with SIGKILL while
// it holds the lock is released (the server ends its session).
func TestLockerDeath(t *testing.T) {
	s, dbURL, schema := schemaOf(t)
	storetest.RunLockerDeath(t, s, func(t *testing.T, name string) func() {
		c := startLockChild(t, "hold", dbURL, schema, envLockName+"="+name)
		require.Equal(t, "locked", c.line(), "the holder ended before it held the lock")
		return func() {
			require.NoError(t, c.cmd.Process.Kill())
			err := c.wait()
			var exit *osexec.ExitError
			require.ErrorAs(t, err, &exit, "the holder exited on its own")
		}
	})
}

// TestLockSchemas: the locks of stores on different schemas of one
// database are different locks; on one schema, two stores share them.
func TestLockSchemas(t *testing.T) {
	ctx := t.Context()
	a, dbURL, schema := schemaOf(t)
	b, _, _ := schemaOf(t)
	sameA, err := pgstore.Open(ctx, dbURL, &pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sameA.Close() })

	unlock, err := a.TryLock(ctx, "n")
	require.NoError(t, err)
	_, err = sameA.TryLock(ctx, "n")
	assert.ErrorIs(t, err, stores.ErrLockHeld, "another store on the same schema")
	unlockB, err := b.TryLock(ctx, "n")
	require.NoError(t, err, "a store on another schema")
	unlockB()
	unlock()
	u, err := sameA.TryLock(ctx, "n")
	require.NoError(t, err)
	u()
}

// TestPassExclusiveAcrossProcesses: eight processes, each with its own DB
// and pgstore on one vault, race for a numbering pass of one series: exactly
// one runs it, holding the lock (it waits inside the pass) until the seven
// others have failed with numbering.ErrPassRunning, and the records end
// numbered exactly 1..N.
func TestPassExclusiveAcrossProcesses(t *testing.T) {
	ctx := t.Context()
	s, dbURL, schema := schemaOf(t)
	v, _ := fleetVaultOn(t, s)
	//lint:ignore SA1019 the race needs passes on a store with compare-and-swap, where only Numbering defers
	series, err := v.Numbering(raceSeries, raceOpts)
	require.NoError(t, err)
	invoices := vault.CollectionOf[fleetRecord](v, fleetCollection)
	ids := make([]string, raceRecords)
	for i := range ids {
		ids[i] = fmt.Sprintf("r-%03d", i)
		require.NoError(t, invoices.Put(ctx, ids[i], fleetRecord{By: ids[i]}))
		_, err := series.Enqueue(ctx, ids[i])
		require.NoError(t, err)
	}

	children := make([]*lockChild, raceProcs)
	for i := range children {
		children[i] = startLockChild(t, "pass", dbURL, schema)
	}
	first := make([]string, raceProcs)
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() { first[i] = c.line() })
	}
	wg.Wait() // the winner waits inside its pass until its stdin closes
	winner := -1
	for i, line := range first {
		switch line {
		case "locked":
			require.Equal(t, -1, winner, "two passes hold the lock: children %d and %d", winner, i)
			winner = i
		case "running":
		default:
			t.Fatalf("child %d said %q, want locked or running", i, line)
		}
	}
	require.NotEqual(t, -1, winner, "no pass got the lock")
	for i, c := range children {
		if i != winner {
			require.NoError(t, c.wait(), "losing child %d", i)
		}
	}
	w := children[winner]
	require.NoError(t, w.stdin.Close())
	assert.Equal(t, "done "+strconv.Itoa(raceRecords), w.line())
	require.NoError(t, w.wait())

	last, err := series.Last(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(raceRecords), last)
	seen := make(map[uint64]string, raceRecords)
	for _, id := range ids {
		r, err := invoices.Get(ctx, id)
		require.NoError(t, err)
		require.NotZero(t, r.Number, "record %s has no number", id)
		require.LessOrEqual(t, r.Number, uint64(raceRecords))
		prev, dup := seen[r.Number]
		require.False(t, dup, "number %d went to %s and %s", r.Number, prev, id)
		seen[r.Number] = id
	}
	assert.Len(t, seen, raceRecords, "numbers 1..N, each once")
}

// BenchmarkTryLock is the cost of an uncontended TryLock and its unlock:
// two round trips on a pooled connection.
func BenchmarkTryLock(b *testing.B) {
	s := pgtest.Open(b, nil)
	ctx := context.Background()
	for b.Loop() {
		unlock, err := s.TryLock(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		unlock()
	}
}
