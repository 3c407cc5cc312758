package noydb_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/badgerstore"
	"github.com/noydb-go/noydb/vault"
)

// An honest store that is merely busy must never raise an alarm: readers
// that verify and audit while writers append see no rollback, and no caller
// fails.

// In the normal run, a busy test's reader makes at least busyRounds
// Verify+Audit rounds, and goes on until the writers made at least busyWrites
// numbers and busyWrites record puts. NOYDB_BUSY_SECONDS=n makes it go on
// for at least n seconds as well, for the figures of a longer run.
const (
	busyRounds = 10
	busyWrites = 300
)

// busyDeadline returns when a busy reader may stop (zero: after busyRounds).
func busyDeadline(t testing.TB) time.Time {
	t.Helper()
	s := os.Getenv("NOYDB_BUSY_SECONDS")
	if s == "" {
		return time.Time{}
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "NOYDB_BUSY_SECONDS")
	return time.Now().Add(time.Duration(n) * time.Second)
}

// errCounter counts the errors of a busy run and reports the first few.
type errCounter struct {
	t testing.TB
	n atomic.Int64
}

func (c *errCounter) add(who string, err error) bool {
	if err == nil {
		return false
	}
	if c.n.Add(1) <= 5 {
		c.t.Errorf("%s: %v", who, err)
	}
	return true
}

// readLoop runs Verify of v's ledger and Audit of seq until stop says so,
// counting errors, and returns how many rounds it made.
func readLoop(ctx context.Context, v *vault.Vault, seq *sequence.Sequence, errs *errCounter, stop func(rounds int) bool) int {
	rounds := 0
	for !stop(rounds) {
		_, err := v.Audit().Verify(ctx)
		errs.add("verify", err)
		_, err = seq.Audit(ctx)
		errs.add("audit", err)
		rounds++
	}
	return rounds
}

// Verify and Audit loop next to 8 writers (4 taking numbers, 4 putting
// records) on one DB without a state folder: no error of any kind, and the
// numbers taken are exactly 1..N.
func TestBusyVerifyAuditNoFalseRollback(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := openVault(t, openDB(t, newStore(t), "firm", "s"), "books")
			seq, err := v.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			errs := &errCounter{t: t}
			deadline := busyDeadline(t)

			var done atomic.Bool
			var numbers, puts atomic.Int64
			var wg sync.WaitGroup
			got := make([][]uint64, 4)
			for w := range 4 {
				wg.Go(func() {
					for !done.Load() {
						n, err := seq.Next(ctx)
						if !errs.add("next", err) {
							got[w] = append(got[w], n)
							numbers.Add(1)
						}
					}
				})
				wg.Go(func() {
					for i := 0; !done.Load(); i++ {
						err := invoices.Put(ctx, fmt.Sprintf("w%d-%d", w, i%50), Invoice{Customer: "c", Total: i})
						if !errs.add("put", err) {
							puts.Add(1)
						}
					}
				})
			}
			rounds := readLoop(ctx, v, seq, errs, func(rounds int) bool {
				return (rounds >= busyRounds && numbers.Load() >= busyWrites && puts.Load() >= busyWrites &&
					!time.Now().Before(deadline)) || errs.n.Load() > 100
			})
			done.Store(true)
			wg.Wait()

			var all []uint64
			for _, g := range got {
				all = append(all, g...)
			}
			t.Logf("%s: %d Verify+Audit rounds, %d numbers, %d puts, %d errors", name, rounds, len(all), puts.Load(), errs.n.Load())
			require.Zero(t, errs.n.Load(), "errors of any kind")
			requireDense(t, all)
			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
		})
	}
}

// Two DBs on one badger store (a server with one DB per signed-in user),
// both taking numbers on one series, one also looping Verify and Audit: no
// error, and the numbers of both together are exactly 1..N.
func TestTwoDBsOneStoreNoFalseRollback(t *testing.T) {
	ctx := context.Background()
	st, err := badgerstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	dbs := []*noydb.DB{openDB(t, st, "firm", "s"), openDB(t, st, "firm", "s")}
	var seqs []*sequence.Sequence
	var vaults []*vault.Vault
	for _, db := range dbs {
		v := openVault(t, db, "books")
		seq, err := v.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		vaults, seqs = append(vaults, v), append(seqs, seq)
	}
	errs := &errCounter{t: t}
	deadline := busyDeadline(t)
	const workers, calls = 4, 300 // per DB

	var wg sync.WaitGroup
	got := make([][]uint64, 2*workers)
	var writers sync.WaitGroup
	for d := range dbs {
		for w := range workers {
			writers.Go(func() {
				for i := 0; i < calls || time.Now().Before(deadline); i++ {
					n, err := seqs[d].Next(ctx)
					if !errs.add(fmt.Sprintf("db %d next", d), err) {
						got[d*workers+w] = append(got[d*workers+w], n)
					}
				}
			})
		}
	}
	var writing atomic.Bool
	writing.Store(true)
	wg.Go(func() {
		writers.Wait()
		writing.Store(false)
	})
	rounds := readLoop(ctx, vaults[0], seqs[0], errs, func(rounds int) bool {
		return rounds > 0 && !writing.Load()
	})
	wg.Wait()

	var all []uint64
	for _, g := range got {
		all = append(all, g...)
	}
	t.Logf("%d Verify+Audit rounds, %d numbers, %d errors", rounds, len(all), errs.n.Load())
	require.Zero(t, errs.n.Load(), "errors of any kind")
	require.GreaterOrEqual(t, len(all), 2*workers*calls)
	requireDense(t, all)
}

// requireDense requires got to be exactly 1..len(got), in any order.
func requireDense(t testing.TB, got []uint64) {
	t.Helper()
	seen := make([]bool, len(got)+1)
	for _, n := range got {
		require.True(t, n >= 1 && n <= uint64(len(got)), "number %d outside 1..%d", n, len(got))
		require.False(t, seen[n], "number %d twice", n)
		seen[n] = true
	}
}
