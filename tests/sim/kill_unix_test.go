//go:build unix

package sim_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/stores/pgstore"
	"github.com/noydb-go/noydb/stores/pgstore/pgtest"
	"github.com/noydb-go/noydb/vault"
)

// Environment of the child process of TestSimKill.
const (
	envKillDir    = "NOYDB_SIM_KILL_DIR"
	envKillSchema = "NOYDB_SIM_KILL_SCHEMA"
	envKillRound  = "NOYDB_SIM_KILL_ROUND"
)

type killNote struct {
	Val int `json:"val"`
}

type killInvoice struct {
	N uint64 `json:"n"`
}

func killVault(ctx context.Context, dir, url, schema string) (*vault.Vault, func(), error) {
	dev, err := badgerstore.Open(filepath.Join(dir, "device"), nil)
	if err != nil {
		return nil, nil, err
	}
	hub, err := pgstore.Open(ctx, url, &pgstore.Options{Schema: schema})
	if err != nil {
		_ = dev.Close()
		return nil, nil, err
	}
	v, err := vault.Open(ctx, vault.Config{Store: dev, Hub: hub, Name: "killed", User: "alice",
		Secret: []byte("alice-secret"), KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1},
		InsecureAllowWeakKDF: true, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		_ = dev.Close()
		hub.Close()
		return nil, nil, err
	}
	return v, func() { _ = v.Close(); _ = dev.Close(); hub.Close() }, nil
}

// TestSimKill is the slow mode's kill -9: a child process works on a
// badger device of a PostgreSQL hub from four goroutines, logging each
// acknowledged result (fsynced) before it goes on, and is killed with
// SIGKILL at a random moment, over and over. At the end every number it
// was given is distinct, every acknowledged record is on the device and on
// the hub with its number, the ledgers verify, and each counter audits
// every acknowledged number as issued.
func TestSimKill(t *testing.T) {
	if !*flagSlow {
		t.Skip("the kill -9 runs in the slow mode (-sim.slow, with NOYDB_PG_URL)")
	}
	url := pgtest.URL(t)
	schema := pgtest.Schema(t)
	dir := t.TempDir()
	ctx := context.Background()
	seed := *flagBase
	r := rand.New(rand.NewPCG(seed, 1))
	rounds := 8
	for round := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSimKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envKillDir+"="+dir, envKillSchema+"="+schema, envKillRound+"="+strconv.Itoa(round))
		out, err := os.Create(filepath.Join(dir, fmt.Sprintf("child-%d.out", round)))
		require.NoError(t, err)
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		wait := time.Duration(300+r.IntN(900)) * time.Millisecond
		time.Sleep(wait) // how long the child lives: the point of the test, not a synchronisation
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		_ = out.Close()
	}
	acks := readAcks(t, dir)
	require.NotEmpty(t, acks, "the children acknowledged nothing")
	v, done, err := killVault(ctx, dir, url, schema)
	require.NoError(t, err)
	defer done()
	_, err = v.Sync(ctx)
	require.NoError(t, err)

	numbers := map[uint64]string{}
	invoices := vault.CollectionOf[killInvoice](v, "invoices")
	notes := vault.CollectionOf[killNote](v, "notes")
	lastNote := map[string]int{}
	for _, a := range acks {
		switch a.kind {
		case "next", "inv":
			if prev, dup := numbers[a.n]; dup {
				t.Errorf("number %d given twice: %s and %s", a.n, prev, a.line)
			}
			numbers[a.n] = a.line
			if a.kind == "inv" {
				inv, err := invoices.Get(ctx, a.id)
				if assert.NoError(t, err, "acknowledged invoice %s", a.id) {
					assert.Equal(t, a.n, inv.N, "invoice %s", a.id)
				}
			}
		case "note":
			lastNote[a.id] = a.val
		}
	}
	for id, val := range lastNote {
		n, err := notes.Get(ctx, id)
		// A later write of the same note may have committed unacknowledged.
		if assert.NoError(t, err, "acknowledged note %s", id) {
			assert.GreaterOrEqual(t, n.Val, val, "note %s", id)
		}
	}
	q, err := v.Sequence("tick", sequence.Options{})
	require.NoError(t, err)
	rep, err := q.Audit(ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.Missing, "numbers missing from the hub's history")
	states := map[uint64]sequence.NumberState{}
	for na := range rep.Numbers() {
		states[na.N] = na.State
	}
	for n, line := range numbers {
		assert.Contains(t, []sequence.NumberState{sequence.StateBound, sequence.StateUnbound}, states[n], "%s", line)
	}
	vr, err := v.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, vr.OK(), "device ledger: %v", vr.Problem)
	fmt.Printf("sim kill: %d rounds, %d acknowledged results, %d numbers, head %d\n", rounds, len(acks), len(numbers), rep.Head)
}

type ack struct {
	line, kind, id string
	n              uint64
	val            int
}

func readAcks(t *testing.T, dir string) []ack {
	t.Helper()
	var out []ack
	files, err := filepath.Glob(filepath.Join(dir, "acks-*.log"))
	require.NoError(t, err)
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := sc.Text()
			p := strings.Fields(line)
			if len(p) != 3 {
				continue // a torn last line: its result was never acknowledged to the log
			}
			a := ack{line: line, kind: p[0], id: p[1]}
			switch a.kind {
			case "note":
				a.val, _ = strconv.Atoi(p[2])
			default:
				a.n, _ = strconv.ParseUint(p[2], 10, 64)
			}
			out = append(out, a)
		}
		_ = fh.Close()
	}
	return out
}

// TestSimKillChild is TestSimKill's child process; it does nothing unless
// started by it.
func TestSimKillChild(t *testing.T) {
	dir := os.Getenv(envKillDir)
	if dir == "" {
		t.Skip("the child process of TestSimKill")
	}
	url := pgtest.URL(t)
	round := os.Getenv(envKillRound)
	ctx := context.Background()
	v, done, err := killVault(ctx, dir, url, os.Getenv(envKillSchema))
	require.NoError(t, err)
	defer done()
	log, err := os.OpenFile(filepath.Join(dir, "acks-"+round+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_SYNC, 0o644)
	require.NoError(t, err)
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		_, _ = fmt.Fprintf(log, format+"\n", args...)
	}
	q, err := v.Sequence("tick", sequence.Options{})
	require.NoError(t, err)
	invoices := vault.CollectionOf[killInvoice](v, "invoices")
	notes := vault.CollectionOf[killNote](v, "notes")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				switch i % 3 {
				case 0:
					if n, err := q.Next(ctx); err == nil {
						logf("next r%sw%di%d %d", round, w, i, n)
					}
				case 1:
					id := fmt.Sprintf("r%sw%di%d", round, w, i)
					if inv, err := invoices.PutNumbered(ctx, id, q, func(s sequence.Serial) (killInvoice, error) {
						return killInvoice{N: s.N}, nil
					}); err == nil {
						logf("inv %s %d", id, inv.N)
					}
				case 2:
					id := fmt.Sprintf("w%d", w)
					val := 1_000_000*(mustAtoi(round)+1) + i
					if err := notes.Put(ctx, id, killNote{Val: val}); err == nil {
						logf("note %s %d", id, val)
					}
				}
				if _, err := v.Sync(ctx); err != nil && i%10 == 0 {
					logf("# sync: %v", err)
				}
			}
		})
	}
	wg.Wait()
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
