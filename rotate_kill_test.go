package noydb_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// rotateChildEnv, when set to "<badger dir>,<round>,<kill delay in
// microseconds>", makes TestRotateKillChild write and rotate until it
// kills itself that long after starting the rotation.
const rotateChildEnv = "NOYDB_ROTATE_KILL_CHILD"

// TestRotateKillChild is the child of TestRotateKilled: on durable badger,
// two writers take numbers of series "inv" with PutNumbered (printing
// "n <number>" once each returned) and two change notes, while the vault's
// keys are rotated (printing "rotated <generation>" once RotateKeys
// returned); once the writers have taken 4 numbers it starts the
// rotation and sends itself SIGKILL after the delay it was given, counted
// from just before RotateKeys (every third round: from its return).
func TestRotateKillChild(t *testing.T) {
	spec := os.Getenv(rotateChildEnv)
	if spec == "" {
		t.Skip("runs only as the child process of TestRotateKilled")
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		t.Fatalf("bad %s", rotateChildEnv)
	}
	round, _ := strconv.Atoi(parts[1])
	delay, _ := strconv.Atoi(parts[2])
	ctx := context.Background()
	st, err := badgerstore.Open(parts[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
	if err != nil {
		t.Fatal(err)
	}
	seq, err := v.Sequence("inv", sequence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
		mu.Unlock()
	}
	started := make(chan struct{}, 4)
	invoices := vault.CollectionOf[Note](v, "invoices")
	notes := vault.CollectionOf[Note](v, "notes")
	for w := range 2 {
		go func() {
			for i := range 1_000_000 { // bounded, in case the parent is gone
				got, err := invoices.PutNumbered(ctx, fmt.Sprintf("r%d-w%d-%d", round, w, i), seq, func(s sequence.Serial) (Note, error) {
					return Note{Text: strconv.FormatUint(s.N, 10)}, nil
				})
				if err != nil {
					say("error %v", err)
					return
				}
				say("n %s", got.Text)
				select {
				case started <- struct{}{}:
				default:
				}
			}
		}()
		go func() {
			for i := range 1_000_000 {
				id := fmt.Sprintf("n-%05d", (i*7+w*13)%1500)
				if err := notes.Put(ctx, id, Note{Text: fmt.Sprintf("r%d %d", round, i)}); err != nil {
					say("error %v", err)
					return
				}
			}
		}()
	}
	// The writers run before the rotation begins.
	for range 4 {
		<-started
	}
	// Every third round counts the delay from the rotation's commit, so
	// that some kills come during the re-sealing however slow the machine
	// is; the others count it from just before RotateKeys.
	fromCommit := round%3 == 2
	if !fromCommit {
		time.AfterFunc(time.Duration(delay)*time.Microsecond, killSelf)
	}
	rot, err := v.RotateKeys(ctx)
	if err != nil {
		say("error %v", err)
		select {}
	}
	say("rotated %d", rot.Generation())
	if fromCommit {
		time.AfterFunc(time.Duration(delay)*time.Microsecond, killSelf)
	}
	select {} // until killed
}

// TestRotateKilled: 30 rounds on badger, each a child process that rotates
// the keys with writers running and is killed with SIGKILL at a random
// point (before, during or after the rotation's commit, during the
// re-sealing). After each kill: the vault opens; every record opens; the
// numbers of series "inv" are exactly 1..N, N the counter, each on one
// record, every number the child printed among them; the generation is
// the one the child printed (or the one before or after, when the kill
// came before it printed); and ResumeRotation finishes the rotation:
// nothing pending, every record sealed by the latest generation.
func TestRotateKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes: slow")
	}
	ctx := context.Background()
	dir := t.TempDir()
	{
		st := openBadger(t, dir)
		v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
		require.NoError(t, err)
		putNotes(t, v, 1500)
		require.NoError(t, v.Close())
		require.NoError(t, st.Close())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var gen uint64 = 1
	killedDuring := 0
	for round := range 30 {
		delay := rng.IntN(150_000) // up to 150 ms after the rotation begins
		if round%3 == 2 {
			delay = rng.IntN(5_000) // up to 5 ms after its commit (see TestRotateKillChild)
		}
		lines := runRotateChild(t, dir, round, delay)
		printed := map[uint64]bool{}
		rotated := uint64(0)
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "n "):
				n, err := strconv.ParseUint(l[2:], 10, 64)
				require.NoError(t, err)
				require.False(t, printed[n], "number %d printed twice", n)
				printed[n] = true
			case strings.HasPrefix(l, "rotated "):
				g, err := strconv.ParseUint(l[8:], 10, 64)
				require.NoError(t, err)
				rotated = g
			default:
				t.Fatalf("round %d: child: %s", round, l)
			}
		}

		st := openBadger(t, dir)
		v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
		require.NoError(t, err, "round %d", round)
		pgen, pending, err := v.PendingRotation(ctx)
		require.NoError(t, err)
		if rotated != 0 {
			require.Equal(t, gen+1, rotated, "round %d", round)
		}
		wasPending := pending
		if pending {
			require.Equal(t, gen+1, pgen, "round %d", round)
			killedDuring++
		}
		// Every record opens.
		for _, c := range []string{"notes", "invoices"} {
			for r, err := range vault.CollectionOf[Note](v, c).List(ctx) {
				require.NoError(t, err, "round %d: %s/%s", round, c, r.ID)
			}
		}
		// Numbers: exactly 1..N, one record each, all printed ones there.
		seq, err := v.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		top, err := seq.Peek(ctx)
		require.NoError(t, err)
		var nums []uint64
		for r, err := range vault.CollectionOf[Note](v, "invoices").List(ctx) {
			require.NoError(t, err)
			n, err := strconv.ParseUint(r.Value.Text, 10, 64)
			require.NoError(t, err)
			nums = append(nums, n)
		}
		slices.Sort(nums)
		require.Len(t, nums, int(top), "round %d", round)
		for i, n := range nums {
			require.Equal(t, uint64(i+1), n, "round %d: numbers are not 1..%d", round, top)
		}
		for n := range printed {
			require.LessOrEqual(t, n, top, "round %d: printed number %d lost", round, n)
		}

		rot, err := v.ResumeRotation(ctx)
		require.NoError(t, err)
		require.NoError(t, rot.Wait(ctx), "round %d", round)
		_, pending, err = v.PendingRotation(ctx)
		require.NoError(t, err)
		require.False(t, pending)
		gen = rot.Generation()
		for it, err := range stores.ListUnder(ctx, st, "v/team/") {
			require.NoError(t, err)
			rest := strings.TrimPrefix(it.Key, "v/team/")
			if strings.HasPrefix(rest, "_") {
				continue
			}
			g, err := crypto.RecordGeneration(it.Value)
			require.NoError(t, err)
			require.Equal(t, gen, g, "round %d: %s", round, rest)
		}
		verified(t, v)
		require.NoError(t, v.Close())
		require.NoError(t, st.Close())
		from := "the rotation began"
		if round%3 == 2 {
			from = "its commit"
		}
		t.Logf("round %d: killed %dµs after %s; printed %d numbers, rotated %d, pending %v; now generation %d, %d numbers",
			round, delay, from, len(printed), rotated, wasPending, gen, top)
	}
	t.Logf("%d of 30 rounds were killed with the rotation pending", killedDuring)
	assert.Positive(t, killedDuring, "no kill came during a re-sealing")
}

// runRotateChild runs TestRotateKillChild on dir and returns the lines it
// printed before it died of SIGKILL.
func runRotateChild(t testing.TB, dir string, round, delay int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRotateKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d", rotateChildEnv, dir, round, delay))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must die of SIGKILL")
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child: %v", err)
	return lines
}
