package noydb_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// restore makes st hold exactly snap, as a store restored from a backup would.
func restore(t testing.TB, st stores.Store, snap map[string]string) {
	t.Helper()
	ctx := context.Background()
	for k := range snapshot(t, st) {
		if _, ok := snap[k]; !ok {
			require.NoError(t, st.Delete(ctx, k))
		}
	}
	for k, v := range snap {
		_, err := st.Put(ctx, k, []byte(v))
		require.NoError(t, err)
	}
}

func openWithState(t testing.TB, st stores.Store, dir string) *noydb.DB {
	t.Helper()
	db, err := noydb.Open(context.Background(), noydb.Config{
		User: "firm", Secret: []byte("s"), Store: st, StateDir: dir,
		KDF: cheapKDF, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// A store snapshot taken at number 41 is restored after 57 were issued: the
// device refuses to issue from it, in this process and after a restart.
func TestSnapshotRestoreIsRollback(t *testing.T) {
	ctx := context.Background()
	st, dir := memstore.New(), t.TempDir()
	db := openWithState(t, st, dir)
	v := openVault(t, db, "books")
	seq, err := v.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	var snap map[string]string
	issued := map[uint64]bool{}
	for range 57 {
		n, err := seq.Next(ctx)
		require.NoError(t, err)
		issued[n] = true
		if n == 41 {
			snap = maps.Clone(snapshot(t, st))
		}
	}
	restore(t, st, snap)

	n, err := seq.Next(ctx)
	assert.ErrorIs(t, err, noydb.ErrRollback)
	assert.Zero(t, n)
	_, err = v.Audit().Verify(ctx)
	assert.ErrorIs(t, err, noydb.ErrRollback)
	require.NoError(t, db.Close())

	// A new process on the same device still knows.
	db2 := openWithState(t, st, dir)
	v2 := openVault(t, db2, "books")
	seq2, err := v2.Sequence("invoice", sequence.Options{})
	require.NoError(t, err)
	for range 5 {
		n, err := seq2.Next(ctx)
		require.ErrorIs(t, err, noydb.ErrRollback)
		assert.False(t, issued[n] && n != 0, "number %d issued twice", n)
	}
	_, err = seq2.Peek(ctx)
	assert.ErrorIs(t, err, noydb.ErrRollback)
}

// Dropping the last k ledger entries (and re-pointing the head, which the
// store can do only by restoring an older head) is caught by the pin.
func TestDroppedLedgerTailIsRollback(t *testing.T) {
	for _, k := range []int{1, 5, 50} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			ctx := context.Background()
			st := memstore.New()
			db := openWithState(t, st, "")
			v := openVault(t, db, "books")
			const total = 60
			snaps := map[int]map[string]string{}
			for i := 1; i <= total; i++ {
				_, err := v.Record(ctx, "test", []byte(fmt.Sprint(i)))
				require.NoError(t, err)
				snaps[i] = maps.Clone(snapshot(t, st))
			}
			rep, err := v.Audit().Verify(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(total), rep.Entries)

			restore(t, st, snaps[total-k])
			for _, err := range v.Audit().Read(ctx, 1) {
				if err != nil {
					assert.ErrorIs(t, err, noydb.ErrRollback)
					return
				}
			}
			t.Fatal("reading a ledger with its last entries dropped did not fail")
		})
	}
}

// growLedger appends at least n application events to v's ledger, 100 at a
// time (concurrent Records share commits), and returns the head after them.
func growLedger(t testing.TB, v *vault.Vault, n uint64) ledger.Head {
	t.Helper()
	var head ledger.Head
	for head.Seq < n {
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		for i := range 100 {
			wg.Go(func() {
				h, err := v.Record(context.Background(), "test", []byte(fmt.Sprint(i)))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if h.Seq > head.Seq {
					head = h
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	return head
}

// Readers racing this process's own writers are not rollbacks: a pin raised
// by a write that finished after a read began must not fail that read.
func TestConcurrentReadsAreNotRollbacks(t *testing.T) {
	for name, newStore := range raceStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			v := openVault(t, openWithState(t, newStore(t), t.TempDir()), "books")
			var seq *sequence.Sequence
			if v.Store().Capabilities().CASAtomic {
				var err error
				seq, err = v.Sequence("inv", sequence.Options{})
				require.NoError(t, err)
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, err := v.Audit().Head(ctx)
						if !assert.NoError(t, err) {
							return
						}
						if seq != nil {
							_, err = seq.Peek(ctx)
							if !assert.NoError(t, err) {
								return
							}
						}
					}
				})
			}
			for i := range 200 {
				if seq != nil {
					_, err := seq.Next(ctx)
					require.NoError(t, err)
				}
				_, err := v.Record(ctx, "test", []byte(fmt.Sprint(i+1)))
				require.NoError(t, err)
			}
			close(stop)
			wg.Wait()
		})
	}
}

// A Void of a number the ledger records as issued, on a counter the store
// rolled back or dropped below it, in a process with no pin of the
// counter (a new device state): the store is behind its ledger, which is
// ErrRollback. Calling the number never issued (ErrNotIssued) would blame
// the caller for the store's rollback. A number neither the counter nor
// the ledger reaches stays ErrNotIssued.
func TestVoidBehindTheLedgerIsRollback(t *testing.T) {
	for name, rollBack := range map[string]func(st stores.Store, snap map[string]string){
		"rolled back": func(st stores.Store, snap map[string]string) {
			for k, v := range snap {
				_, err := st.Put(context.Background(), k, []byte(v))
				require.NoError(t, err)
			}
		},
		"dropped": func(st stores.Store, snap map[string]string) {
			for k := range snap {
				require.NoError(t, st.Delete(context.Background(), k))
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := memstore.New()
			db := openWithState(t, st, t.TempDir())
			seq, err := openVault(t, db, "books").Sequence("invoice", sequence.Options{})
			require.NoError(t, err)
			counters := map[string]string{}
			for n := uint64(1); n <= 9; n++ {
				got, err := seq.Next(ctx)
				require.NoError(t, err)
				require.Equal(t, n, got)
				if n == 4 {
					for k, v := range snapshot(t, st) {
						if strings.Contains(k, "/_sequences/invoice") && !strings.Contains(k, "\x01") { // the counter, not the definition
							counters[k] = v
						}
					}
				}
			}
			require.NotEmpty(t, counters)
			require.NoError(t, db.Close())
			rollBack(st, counters)

			db2 := openWithState(t, st, t.TempDir()) // no pin of the counter
			seq2, err := openVault(t, db2, "books").Sequence("invoice", sequence.Options{})
			require.NoError(t, err)
			err = seq2.Void(ctx, 7, "cancelled")
			require.ErrorIs(t, err, noydb.ErrRollback)
			assert.NotErrorIs(t, err, sequence.ErrNotIssued)
			err = seq2.Void(ctx, 12, "cancelled")
			assert.ErrorIs(t, err, sequence.ErrNotIssued)
			assert.NotErrorIs(t, err, noydb.ErrRollback)
		})
	}
}
