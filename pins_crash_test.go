package noydb_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/badgerstore"
)

// pinsChildEnv, when set to "<badger dir><list separator><state dir>", makes
// TestPinsCrashChild take numbers until it is killed.
// pinsChildKillEnv is how many numbers it prints before it sends itself
// SIGKILL.
const (
	pinsChildEnv     = "NOYDB_PINS_CRASH_CHILD"
	pinsChildKillEnv = "NOYDB_PINS_CRASH_CHILD_KILL"
)

// TestPinsCrashChild is the child of TestPinsSurviveKill: 8 goroutines take
// numbers of series "inv" in vault "books" on durable badger with a
// StateDir, and print each number on its own line once Next has returned.
func TestPinsCrashChild(t *testing.T) {
	spec := os.Getenv(pinsChildEnv)
	if spec == "" {
		t.Skip("runs only as the child process of TestPinsSurviveKill")
	}
	storeDir, stateDir, ok := strings.Cut(spec, string(os.PathListSeparator))
	if !ok {
		t.Fatalf("bad %s", pinsChildEnv)
	}
	ctx := context.Background()
	st, err := badgerstore.Open(storeDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	db, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("s"), Store: st, StateDir: stateDir,
		KDF: cheapKDF, InsecureAllowWeakKDF: true})
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.OpenVault(ctx, "books")
	if err != nil {
		t.Fatal(err)
	}
	seq, err := v.Sequence("inv", sequence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := strconv.Atoi(os.Getenv(pinsChildKillEnv))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	printed := 0
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100_000 { // bounded, in case the parent is gone
				n, err := seq.Next(ctx)
				mu.Lock()
				if err != nil {
					fmt.Fprintf(out, "error %v\n", err)
				} else {
					fmt.Fprintf(out, "%d\n", n)
					printed++
				}
				_ = out.Flush()
				if printed == want {
					// Crash right after Next returned, other calls in flight.
					killSelf()
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
}

// A child process takes numbers with a StateDir on durable badger, printing
// each once Next has returned, and is killed with SIGKILL. The folders as
// the kill left them go on with no false alarm. Then the store is restored
// to the copy taken before the child started and brought, without the
// device's pins, up to just below the highest number the child printed:
// opened with the state folder as the kill left it, the device refuses to
// issue (ErrRollback), so no printed number is ever issued again.
func TestPinsSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes: slow")
	}
	ctx := context.Background()
	storeDir, stateDir := t.TempDir(), t.TempDir()
	// Create the vault.
	{
		st := openBadger(t, storeDir)
		takeN(t, st, stateDir, 0)
		require.NoError(t, st.Close())
	}
	const rounds = 10
	caught := 0
	for round := range rounds {
		backup := copyTree(t, storeDir)
		want := 5 + round*40 // numbers to see printed before the kill
		printed := runAndKill(t, storeDir, stateDir, want)
		require.Len(t, printed, want)
		seen := map[uint64]bool{}
		var highest uint64
		for _, n := range printed {
			require.False(t, seen[n], "child printed %d twice", n)
			seen[n] = true
			highest = max(highest, n)
		}
		killedState := copyTree(t, stateDir)

		// The folders as the kill left them: no alarm, numbers go on above.
		st := openBadger(t, storeDir)
		db := openWithState(t, st, stateDir)
		seq, err := openVault(t, db, "books").Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		n, err := seq.Next(ctx)
		require.NoError(t, err, "round %d", round)
		assert.Greater(t, n, highest)
		require.NoError(t, db.Close())
		require.NoError(t, st.Close())

		// The backup restored and, with no memory of the device, brought to
		// highest-1: the next number would be one the child printed.
		st = openBadger(t, copyTree(t, backup))
		// Its ledger is grown past anything the device can have pinned, so
		// that its head alone does not look rolled back.
		rogue := openWithState(t, st, "")
		rv := openVault(t, rogue, "books")
		rs, err := rv.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		require.NoError(t, rs.SeedTo(ctx, highest-1))
		n, err = rs.Peek(ctx)
		require.NoError(t, err)
		require.Equal(t, highest-1, n)
		growLedger(t, rv, 2*highest+100)
		require.NoError(t, rogue.Close())

		// The device's state as the kill left it refuses to issue from it.
		db = openWithState(t, st, killedState)
		v, err := db.OpenVault(ctx, "books")
		if err == nil {
			seq, err = v.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			n, err = seq.Next(ctx)
			assert.False(t, seen[n], "round %d: number %d printed by the child issued again", round, n)
		}
		// The counter's pin or the ledger's (read by the counter's check
		// against the ledger before its first write) catches it: both are
		// fsynced before the numbers they cover are returned.
		roundCaught := assert.ErrorIs(t, err, noydb.ErrRollback, "round %d", round)
		if roundCaught {
			caught++
		}
		require.NoError(t, db.Close())
		require.NoError(t, st.Close())
		t.Logf("round %d: child printed %d numbers (highest %d) before SIGKILL; restore caught: %v", round, len(printed), highest, roundCaught)
	}
	t.Logf("%d of %d rounds caught the restored store", caught, rounds)
}

func openBadger(t testing.TB, dir string) *badgerstore.Store {
	t.Helper()
	st, err := badgerstore.Open(dir, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// copyTree copies a folder into a new temporary one.
func copyTree(t testing.TB, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.CopyFS(to, os.DirFS(dir)))
	return to
}

// runAndKill starts the child on the folders, which kills itself once it
// has printed want numbers, and returns every number it printed.
func runAndKill(t testing.TB, storeDir, stateDir string, want int) []uint64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPinsCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		pinsChildEnv+"="+storeDir+string(os.PathListSeparator)+stateDir,
		pinsChildKillEnv+"="+strconv.Itoa(want))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	var printed []uint64
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		n, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("child: %s", sc.Text())
		}
		printed = append(printed, n)
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must die of SIGKILL")
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child: %v", err)
	return printed
}
