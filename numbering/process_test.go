package numbering_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores/filestore"
)

// The test binary re-executed with childEnv set runs one pass over the file
// store in that folder instead of the tests, prints "ready" before the pass
// and "done <assigned> <resumed>" after it, and exits 0, or 3 on ErrPassRunning.
// With holdEnv set it prints "locked" once it holds the lock and waits for
// its standard input to close before it goes on.
const (
	childEnv = "NOYDB_NUMBERING_CHILD_DIR"
	holdEnv  = "NOYDB_NUMBERING_CHILD_HOLD"
	stepEnv  = "NOYDB_NUMBERING_CHILD_STEP"
)

const exitPassRunning = 3

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(childPass(dir))
	}
	os.Exit(m.Run())
}

func childPass(dir string) int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	st, err := filestore.Open(dir, &filestore.Options{NoSync: true})
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	db, err := noydb.Open(ctx, noydb.Config{User: "shop", Secret: []byte(secret), Store: st,
		KDF: cheapKDF, InsecureAllowWeakKDF: true})
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	v, err := db.OpenVault(ctx, vaultName)
	if err != nil {
		return fail(err)
	}
	//lint:ignore SA1019 these tests cover the deprecated JSON-field API too
	s, err := v.Numbering("receipts", receiptOpts)
	if err != nil {
		return fail(err)
	}
	if step, _ := strconv.Atoi(os.Getenv(stepEnv)); step > 0 {
		numbering.Tune(s, step, 3*step)
	}
	if os.Getenv(holdEnv) != "" {
		numbering.OnLocked(s, func() {
			fmt.Println("locked")
			_, _ = io.Copy(io.Discard, os.Stdin)
		})
	}
	fmt.Println("ready")
	rep, err := s.RunPass(ctx)
	if errors.Is(err, numbering.ErrPassRunning) {
		fmt.Println("running")
		return exitPassRunning
	}
	if err != nil {
		return fail(err)
	}
	fmt.Println("done", rep.Assigned, rep.Resumed)
	return 0
}

// child is a running child pass.
type child struct {
	cmd   *exec.Cmd
	out   *bufio.Scanner
	stdin io.WriteCloser
}

func startChild(tb testing.TB, dir string, env ...string) *child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// A binary built with -race sleeps a second at exit unless told not to.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=" + dir, "GORACE=" + gorace}, env...)...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(tb, err)
	stdin, err := cmd.StdinPipe()
	require.NoError(tb, err)
	require.NoError(tb, cmd.Start())
	c := &child{cmd: cmd, out: bufio.NewScanner(stdout), stdin: stdin}
	tb.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	return c
}

// expect reads the child's next line and checks it starts with want.
func (c *child) expect(tb testing.TB, want string) string {
	tb.Helper()
	require.True(tb, c.out.Scan(), "child ended before %q: %v", want, c.out.Err())
	line := c.out.Text()
	require.True(tb, strings.HasPrefix(line, want), "child said %q, want %q", line, want)
	return line
}

// wait waits for the child to exit and returns its exit code (-1 when killed).
func (c *child) wait(tb testing.TB) int {
	tb.Helper()
	_ = c.stdin.Close()
	for c.out.Scan() {
	}
	err := c.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	require.NoError(tb, err)
	return 0
}

// runChild runs one child pass to its end, requires that it succeeded, and
// returns how many numbers it resumed from an interrupted batch.
func runChild(tb testing.TB, dir string, env ...string) int {
	tb.Helper()
	c := startChild(tb, dir, env...)
	c.expect(tb, "ready")
	var assigned, resumed int
	_, err := fmt.Sscanf(c.expect(tb, "done"), "done %d %d", &assigned, &resumed)
	require.NoError(tb, err)
	require.Equal(tb, 0, c.wait(tb), "child pass failed")
	return resumed
}

// TestKilledPass kills a child process running a pass with SIGKILL at a
// random moment (within 0–30 ms of its start, or of the time a full pass
// takes), fifty times, each time with new records pending, and
// reruns the pass: every record ends with exactly one number, the numbers
// are 1..N in provisional order per batch, the ledger has one entry per
// number, and a further pass changes nothing.
func TestKilledPass(t *testing.T) {
	// A pass saves its progress every 8 numbers and writes chunks of 24 ids,
	// so the kills land in every phase of many steps.
	rounds, perRound := 50, 200
	if testing.Short() {
		rounds = 10
	}
	dir := t.TempDir()
	d := openDevice(t, "till", openFileStore(t, dir), receiptOpts)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var ids []string
	killedMidPass, killedAfterCommit := 0, 0
	var fullPass time.Duration
	for round := range rounds {
		batch := make([]string, perRound)
		for i := range batch {
			batch[i] = fmt.Sprintf("r-%02d-%03d", round, i)
		}
		require.NoError(t, d.writeMany(batch))
		ids = append(ids, batch...)
		c := startChild(t, dir, stepEnv+"=8")
		c.expect(t, "ready")
		// Fault injection, not synchronisation: the kill lands at a random
		// moment in the first 30 ms of the pass, or (every other round) in
		// the time the last full pass took, so it also hits the stamping.
		window := 30 * time.Millisecond
		if round%2 == 1 {
			window = max(window, fullPass)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(window) + 1)))
		if err := c.cmd.Process.Signal(syscall.SIGKILL); !errors.Is(err, os.ErrProcessDone) {
			require.NoError(t, err)
		}
		if c.wait(t) == -1 {
			killedMidPass++
		}
		start := time.Now()
		if runChild(t, dir, stepEnv+"=8") > 0 {
			killedAfterCommit++
		}
		fullPass = time.Since(start)

		last, err := d.series.Last(context.Background())
		require.NoError(t, err)
		require.Equal(t, uint64(len(ids)), last, "round %d", round)
		if round%10 == 9 || round == rounds-1 {
			checkNumbered(t, d, ids)
		}
	}
	got := checkNumbered(t, d, ids)
	checkLedger(t, d, got)
	t.Logf("%d of %d passes killed before they ended, %d of them after their commit point",
		killedMidPass, rounds, killedAfterCommit)

	before := snapshot(t, d.db.Store())
	runChild(t, dir)
	assert.Equal(t, before, snapshot(t, d.db.Store()), "a pass after the last one changed the store")
}

// TestTwoProcesses starts passes in two processes over one folder: while
// one holds the lock the other fails with ErrPassRunning and numbers
// nothing; started at the same instant, they never number a record twice.
func TestTwoProcesses(t *testing.T) {
	t.Run("held", func(t *testing.T) {
		dir := t.TempDir()
		d := openDevice(t, "till", openFileStore(t, dir), receiptOpts)
		var ids []string
		for i := range 100 {
			ids = append(ids, fmt.Sprintf("r-%03d", i))
			d.write(t, ids[i], i)
		}
		holder := startChild(t, dir, holdEnv+"=1")
		holder.expect(t, "ready")
		holder.expect(t, "locked")
		before := snapshot(t, d.db.Store())
		loser := startChild(t, dir)
		loser.expect(t, "ready")
		loser.expect(t, "running")
		require.Equal(t, exitPassRunning, loser.wait(t))
		assert.Equal(t, before, snapshot(t, d.db.Store()), "the losing pass wrote")
		_, err := d.series.RunPass(context.Background()) // this process too
		require.ErrorIs(t, err, numbering.ErrPassRunning)

		require.NoError(t, holder.stdin.Close())
		holder.expect(t, "done 100")
		require.Equal(t, 0, holder.wait(t))
		checkLedger(t, d, checkNumbered(t, d, ids))
	})
	t.Run("at once", func(t *testing.T) {
		dir := t.TempDir()
		d := openDevice(t, "till", openFileStore(t, dir), receiptOpts)
		var ids []string
		for round := range 3 {
			batch := make([]string, 150)
			for i := range batch {
				batch[i] = fmt.Sprintf("r-%d-%03d", round, i)
			}
			require.NoError(t, d.writeMany(batch))
			ids = append(ids, batch...)
			a, b := startChild(t, dir, stepEnv+"=20"), startChild(t, dir, stepEnv+"=20")
			codes := []int{a.wait(t), b.wait(t)}
			for _, code := range codes {
				require.Contains(t, []int{0, exitPassRunning}, code)
			}
			require.Contains(t, codes, 0)
			checkNumbered(t, d, ids)
		}
		checkLedger(t, d, checkNumbered(t, d, ids))
	})
}
