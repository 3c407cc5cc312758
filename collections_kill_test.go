package noydb_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// grantChildEnv, when set to "<badger dir>,<user>,<kill delay in
// microseconds>", makes TestCollectionsGrantKillChild grant user, limited
// to "notes", and kill itself that long after the grant began; a delay of
// -1 kills it once the grant's re-sealing has handled its first records.
const grantChildEnv = "NOYDB_GRANT_KILL_CHILD"

// TestCollectionsGrantKillChild is the child of TestCollectionsGrantKilled:
// on durable badger, a writer changes payroll records while olga grants a
// reader limited to "notes" (printing "granted" once Grant returned); it
// sends itself SIGKILL after the delay it was given, counted from just
// before Grant.
func TestCollectionsGrantKillChild(t *testing.T) {
	spec := os.Getenv(grantChildEnv)
	if spec == "" {
		t.Skip("runs only as the child process of TestCollectionsGrantKilled")
	}
	var dir, user string
	var delay int
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		t.Fatalf("bad %s", grantChildEnv)
	}
	dir, user = parts[0], parts[1]
	if _, err := fmt.Sscan(parts[2], &delay); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := badgerstore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
	if err != nil {
		t.Fatal(err)
	}
	payroll := vault.CollectionOf[Note](v, "payroll")
	go func() {
		for i := range 1_000_000 { // bounded, in case the parent is gone
			if err := payroll.Put(ctx, fmt.Sprintf("p-%04d", i%900), Note{Text: user}); err != nil {
				fmt.Printf("error %v\n", err)
				return
			}
		}
	}()
	if delay >= 0 {
		time.AfterFunc(time.Duration(delay)*time.Microsecond, killSelf)
	} else {
		// Fault injection, not synchronisation: watch the re-sealing and
		// kill in its middle.
		go func() {
			for {
				if r := v.Rotation(); r != nil && r.Progress().Done > 0 {
					killSelf()
				}
				time.Sleep(50 * time.Microsecond)
			}
		}()
	}
	if err := v.Grant(ctx, user, vault.Secret([]byte("s")), vault.RoleReader, "notes"); err != nil {
		fmt.Printf("error %v\n", err)
		select {}
	}
	fmt.Println("granted")
	select {} // until killed
}

// TestCollectionsGrantKilled: 12 rounds on badger, each a child process
// that grants a new reader limited to "notes", with a writer running, and
// is killed with SIGKILL at a random point (before, during or after the
// grant's commit, during the re-sealing). After each kill: the vault
// opens and every record opens; a person the child printed as granted
// exists; ResumeRotation finishes what the kill left; and then, for every
// person granted so far, no payroll record opens with any key their
// keyring entry holds (unwrapped by hand) while every note does.
func TestCollectionsGrantKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes: slow")
	}
	ctx := context.Background()
	dir := t.TempDir()
	{
		st := openBadger(t, dir)
		v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
		require.NoError(t, err)
		putNotes(t, v, 600)
		items := map[string]Note{}
		for i := range 900 {
			items[fmt.Sprintf("p-%04d", i)] = Note{Text: "salary"}
		}
		require.NoError(t, vault.CollectionOf[Note](v, "payroll").PutMany(ctx, items))
		require.NoError(t, v.Close())
		require.NoError(t, st.Close())
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var granted []string
	pendingRounds := 0
	for round := range 12 {
		user := fmt.Sprintf("p%02d", round)
		delay := rng.IntN(150_000) // up to 150 ms after the grant begins
		if round == 0 {
			delay = -1 // one kill in the middle of a re-sealing, whatever the machine's speed
		}
		lines := runGrantChild(t, dir, user, delay)
		printed := false
		for _, l := range lines {
			require.Equal(t, "granted", l, "round %d: child", round)
			printed = true
		}

		st := openBadger(t, dir)
		v, err := vault.Open(ctx, personCfg(st, "olga", "o"))
		require.NoError(t, err, "round %d", round)
		for _, c := range []string{"notes", "payroll"} {
			n := 0
			for r, err := range vault.CollectionOf[Note](v, c).List(ctx) {
				require.NoError(t, err, "round %d: %s/%s", round, c, r.ID)
				n++
			}
			require.Equal(t, map[string]int{"notes": 600, "payroll": 900}[c], n, "round %d", round)
		}
		people, err := v.People(ctx)
		require.NoError(t, err)
		exists := false
		for _, p := range people {
			if p.Name == user {
				exists = true
				assert.Equal(t, []string{"notes"}, p.Collections)
			}
		}
		if printed {
			require.True(t, exists, "round %d: %s printed as granted", round, user)
		}
		_, pending, err := v.PendingRotation(ctx)
		require.NoError(t, err)
		if pending {
			pendingRounds++
		}
		rot, err := v.ResumeRotation(ctx)
		require.NoError(t, err)
		require.NoError(t, rot.Wait(ctx), "round %d", round)
		if exists {
			granted = append(granted, user)
		}
		for _, p := range granted {
			keys := entryKeys(t, st, p, "s")
			opened, total := rawOpens(t, st, "payroll", keys)
			require.Equal(t, 900, total)
			require.Zero(t, opened, "round %d: payroll records open with %s's keys", round, p)
			opened, total = rawOpens(t, st, "notes", keys)
			require.Equal(t, 600, total)
			require.Equal(t, 600, opened, "round %d: notes %s cannot open", round, p)
		}
		verified(t, v)
		require.NoError(t, v.Close())
		require.NoError(t, st.Close())
		t.Logf("round %d: killed %dµs after the grant began; granted %v (printed %v), re-sealing pending %v",
			round, delay, exists, printed, pending)
	}
	t.Logf("%d of 12 rounds were killed with the re-sealing pending; %d people granted", pendingRounds, len(granted))
	assert.Positive(t, pendingRounds, "no kill came during a re-sealing (round 0 kills in one)")
	assert.NotEmpty(t, granted)
}

// runGrantChild runs TestCollectionsGrantKillChild on dir and returns the
// lines it printed before it died of SIGKILL.
func runGrantChild(t testing.TB, dir, user string, delay int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCollectionsGrantKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d", grantChildEnv, dir, user, delay))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "PASS") && !strings.HasPrefix(l, "ok ") {
			lines = append(lines, l)
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must die of SIGKILL")
	ws, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "child: %v", err)
	return lines
}
