package ledger_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
)

// crashEnv, when set in the environment as "<store>:<dir>:<run>:<kill>",
// makes the test binary a crash-test child: TestMain runs crashChild instead
// of the tests. kill is "-" (the parent kills the child), or "b<n>" / "a<n>":
// the child sends itself SIGKILL just before / just after its n-th store write.
const crashEnv = "NOYDB_LEDGER_CRASH_CHILD"

// crashStores are the durable stores the crash test kills appenders on.
var crashStores = map[string]func(dir string) (stores.Store, error){
	"filestore": func(dir string) (stores.Store, error) { return filestore.Open(dir, nil) },
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashEnv); spec != "" {
		os.Exit(crashChild(spec))
	}
	os.Exit(m.Run())
}

// crashChild appends to the ledger in dir until it is killed, writing one
// line "<seq> <request id>..." to stdout for each acknowledged append: the
// position of the batch's last entry and the ids of its entries, in order.
// Batches are 1 to 3 entries.
func crashChild(spec string) int {
	f := strings.Split(spec, ":")
	if len(f) != 4 {
		fmt.Fprintln(os.Stderr, "bad spec", spec)
		return 2
	}
	kind, dir, run, kill := f[0], f[1], f[2], f[3]
	st, err := crashStores[kind](dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	if kill != "-" {
		n, _ := strconv.Atoi(kill[1:])
		writes := 0
		die := func(op faultstore.Op, _ string) error {
			if op.IsWrite() {
				if writes++; writes == n {
					killSelf()
					select {} // wait for the signal
				}
			}
			return nil
		}
		opts := faultstore.Options{Before: die}
		if kill[0] == 'a' {
			opts = faultstore.Options{After: die}
		}
		st = faultstore.New(st, opts)
	}
	l := ledgerOn(st)
	ctx := context.Background()
	for i := range 100_000 { // bounded, in case the parent is gone
		batch := make([]ledger.Entry, 1+i%3)
		for j := range batch {
			batch[j] = fact(i)
			batch[j].RequestID = fmt.Sprintf("%s-%d-%d", run, i, j)
		}
		h, err := l.Append(ctx, batch...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "append:", err)
			return 2
		}
		line := strconv.FormatUint(h.Seq, 10)
		for _, e := range batch {
			line += " " + e.RequestID
		}
		if _, err := fmt.Fprintln(os.Stdout, line); err != nil {
			return 3
		}
	}
	return 0
}

// TestCrashRecovery kills an appending child process with SIGKILL at a
// random point, 25 times per durable store, and after every kill reopens the
// store: Verify passes and every append the child acknowledged is there.
// Half the kills come from the parent, after a random number of
// acknowledgements; the other half from the child itself, just before or
// just after a random store write, so that every step of an append is hit.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary 25 times per store; skipped with -short")
	}
	t.Parallel() // mostly waiting on child processes and fsync
	const runs = 25
	for kind, open := range crashStores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			acked := map[uint64]string{}
			rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
			for run := range runs {
				// The parent kills after 0 to 30 acknowledgements (the child is
				// then inside its next append, or still opening the store); or
				// the child kills itself around one of its first 60 writes.
				killAfter, self := rng.IntN(31), "-"
				if run%2 == 1 {
					killAfter, self = -1, fmt.Sprintf("%c%d", "ba"[rng.IntN(2)], 1+rng.IntN(60))
				}
				for seq, id := range crashOnce(t, kind, dir, fmt.Sprintf("r%d:%s", run, self), killAfter) {
					acked[seq] = id
				}

				st, err := open(dir)
				require.NoError(t, err)
				l := newLedger(t, st)
				rep, err := l.Verify(context.Background())
				require.NoError(t, err, "run %d, killed after %d acks / at %s", run, killAfter, self)
				found := make(map[uint64]string, rep.Entries)
				for e, err := range l.Read(context.Background(), 1) {
					require.NoError(t, err)
					found[e.Seq] = e.RequestID
				}
				for seq, id := range acked {
					require.Equal(t, id, found[seq], "acknowledged entry %d (run %d)", seq, run)
				}
				require.NoError(t, st.Close())
			}
			t.Logf("%s: %d acknowledged entries survived %d kills", kind, len(acked), runs)
		})
	}
}

// crashOnce runs one child on dir, kills it after it acknowledged killAfter
// appends (never if killAfter < 0: it kills itself), and returns the
// position and id of every entry of every append it acknowledged before it
// died.
func crashOnce(t *testing.T, kind, dir, spec string, killAfter int) map[uint64]string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%s:%s", crashEnv, kind, dir, spec))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	acks := map[uint64]string{}
	appends := 0
	killed := false
	kill := func() {
		if !killed {
			killed = true
			require.NoError(t, cmd.Process.Kill())
		}
	}
	if killAfter == 0 {
		kill()
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.GreaterOrEqual(t, len(f), 2, "bad line %q", sc.Text())
		last, err := strconv.ParseUint(f[0], 10, 64)
		require.NoError(t, err, "bad line %q", sc.Text())
		ids := f[1:]
		for i, id := range ids {
			acks[last-uint64(len(ids)-1-i)] = id
		}
		if appends++; killAfter >= 0 && appends >= killAfter {
			kill()
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "child ended with %v; stderr: %s", err, stderr.String())
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child was not killed: %v; stderr: %s", err, stderr.String())
	return acks
}
