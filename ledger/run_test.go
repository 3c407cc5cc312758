package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/wire"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
)

// A long run of entries appended in one call (a batch of numbers, whose
// entries are sealed on two goroutines) is written whole and in order:
// it reads back as appended and verifies, signed or not, in an Update
// alone in its batch (each entry sealed once) and in one among others; a
// run in a closure that fails leaves nothing.
func TestLongRunOfEntriesIsWrittenInOrder(t *testing.T) {
	ctx := context.Background()
	const run = 100
	entries := func(from int) []ledger.Entry {
		out := make([]ledger.Entry, run)
		for i := range out {
			out[i] = fact(from + i)
		}
		return out
	}
	for _, signed := range []bool{false, true} {
		t.Run(fmt.Sprint("signed=", signed), func(t *testing.T) {
			sc := &sealCounter{sealer: newSealer(t), seen: map[string]int{}}
			opts := ledger.Options{Actor: "olga", Now: func() time.Time { return fixedNow }}
			if signed {
				opts.Signer = olga
				opts.People = func(context.Context) (map[string]wire.LedgerPerson, error) { return nil, nil }
			}
			l := ledger.New(memstore.New(), sc, macer{macKey}, prefix, opts)
			// Alone in its batch.
			require.NoError(t, l.Update(ctx, func(tx stores.Tx) error {
				_, err := l.AppendTx(ctx, tx, entries(1)...)
				return err
			}))
			// A plain Append of a run.
			_, err := l.Append(ctx, entries(run+1)...)
			require.NoError(t, err)
			assert.Equal(t, 1, sc.entrySeals(), "an entry sealed more than once")
			// Among others: runs in closures started together, one failing.
			errs := make(chan error, 3)
			start := make(chan struct{})
			boom := errors.New("boom")
			for i, fails := range []bool{false, true, false} {
				go func() {
					<-start
					errs <- l.Update(ctx, func(tx stores.Tx) error {
						if _, err := l.AppendTx(ctx, tx, entries(1000*(i+1))...); err != nil {
							return err
						}
						if fails {
							return boom
						}
						return nil
					})
				}()
			}
			close(start)
			failed := 0
			for range 3 {
				if err := <-errs; err != nil {
					require.ErrorIs(t, err, boom)
					failed++
				}
			}
			require.Equal(t, 1, failed)
			verifyClean(t, l, 4*run)
			got := readAll(t, l, 1)
			require.Len(t, got, 4*run)
			for i := range 2 * run {
				assert.Equal(t, fmt.Sprintf("inv-%d", i+1), got[i].ID, "entry %d", i+1)
			}
			// The two runs that committed follow, each whole and in order.
			for k := 2 * run; k < 4*run; k += run {
				first := got[k].Revision
				for i := range run {
					assert.Equal(t, first+uint64(i), got[k+i].Revision, "entry %d", k+i+1)
				}
			}
		})
	}
}

// lateRunPanicSealer panics sealing the entry at one key only: the last of
// a long run, which the second goroutine of the run's sealing seals.
type lateRunPanicSealer struct {
	sealer
	key  string
	done atomic.Bool
}

func (s *lateRunPanicSealer) Seal(key string, plaintext []byte) ([]byte, error) {
	if key == s.key && s.done.CompareAndSwap(false, true) {
		panic("sealer bug")
	}
	return s.sealer.Seal(key, plaintext)
}

// A panic while a long run is sealed, on whichever goroutine seals the
// entry, goes on in the caller (the process lives on) and releases the
// group, as a panic sealing a single entry does; the run is not written.
func TestPanicSealingALongRunPanicsInTheCaller(t *testing.T) {
	// The run is sealed on two goroutines where there are two procs.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0))))
	const run = 40
	st := memstore.New()
	s := &lateRunPanicSealer{sealer: newSealer(t), key: prefix + "_ledger/" + fmt.Sprintf("%020d", run)}
	l := ledger.New(st, s, macer{macKey}, prefix, ledger.Options{Actor: "tester", Now: func() time.Time { return fixedNow }})
	entries := make([]ledger.Entry, run)
	for i := range entries {
		entries[i] = fact(i + 1)
	}
	assert.PanicsWithValue(t, "sealer bug", func() { _, _ = l.Append(context.Background(), entries...) })
	require.True(t, s.done.Load(), "the sealer was not asked for the run's last entry")
	h, err := l.Append(context.Background(), fact(1))
	require.NoError(t, err, "the lead was released")
	assert.Equal(t, uint64(1), h.Seq, "the run that panicked was written")
	verifyClean(t, newLedger(t, st), 1)
}
