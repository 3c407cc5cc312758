package noydb_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// Two processes take numbers of one series; then the store puts the
// counter back to a value it held after the first process's check (above
// the floor that check found), keeping the ledger. The first process's
// next allocation reads a counter another writer moved, so it asks the
// ledger again: ErrRollback, no number. (Before, it trusted the floor of
// its first check and gave again a number the other process had given.)
func TestCounterRolledBackAfterAnotherWriterIsRollback(t *testing.T) {
	const key = "v/books/_sequences/invoice"
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			_, v1 := openSession(t, adv.Store(), "")
			q1 := mustSeq(t, v1, "invoice")
			nextN(t, q1, 2) // 1, 2: q1 checked its counter at 0
			_, v2 := openSession(t, adv.Store(), "")
			q2 := mustSeq(t, v2, "invoice")
			nextN(t, q2, 1) // 3
			snap, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			nextN(t, q2, 2) // 4, 5
			require.NoError(t, adv.Restore(ctx, snap, key))

			n, err := q1.Next(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.Zero(t, n, "4 was given already")
		})
	}
}

// An honest store with two processes taking numbers of one series raises
// no alarm, however often each finds the counter moved by the other, and
// the numbers are exactly 1..N.
func TestCounterMovedByAnotherWriterIsNoAlarm(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			const procs, callers, each = 2, 4, 40
			var wg sync.WaitGroup
			got := make(chan uint64, procs*callers*each)
			for range procs {
				_, v := openSession(t, st, "")
				q := mustSeq(t, v, "invoice")
				for range callers {
					wg.Go(func() {
						for range each {
							n, err := q.Next(ctx)
							if err != nil {
								t.Error(err)
								return
							}
							got <- n
						}
					})
				}
			}
			wg.Wait()
			close(got)
			seen := map[uint64]bool{}
			for n := range got {
				require.False(t, seen[n], "number %d twice", n)
				seen[n] = true
			}
			for n := uint64(1); n <= procs*callers*each; n++ {
				require.True(t, seen[n], "number %d missing", n)
			}
		})
	}
}

// ledgerReads counts the ledger entries a store serves: each listed or
// fetched key of a ledger position.
type ledgerReads struct {
	stores.Store
	tr      stores.Transactor
	entries atomic.Int64
}

func countLedgerReads(st stores.Store) *ledgerReads {
	return &ledgerReads{Store: st, tr: st.(stores.Transactor)}
}

func (c *ledgerReads) count(key string) {
	_, rest, ok := strings.Cut(key, "/_ledger/")
	if ok && rest != "" && rest[0] >= '0' && rest[0] <= '9' {
		c.entries.Add(1)
	}
}

func (c *ledgerReads) Get(ctx context.Context, key string) (stores.Item, error) {
	c.count(key)
	return c.Store.Get(ctx, key)
}

func (c *ledgerReads) List(ctx context.Context, prefix string) iter.Seq2[stores.Item, error] {
	return c.ListAfter(ctx, prefix, "")
}

func (c *ledgerReads) ListAfter(ctx context.Context, prefix, after string) iter.Seq2[stores.Item, error] {
	return func(yield func(stores.Item, error) bool) {
		for it, err := range stores.ListAfter(ctx, c.Store, prefix, after) {
			if err == nil {
				c.count(it.Key)
			}
			if !yield(it, err) {
				return
			}
		}
	}
}

func (c *ledgerReads) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return c.tr.Update(ctx, fn)
}

// The first allocation of a counter after a restart checks it against
// what the ledger records without reading the ledger: the ledger keeps a
// checkpoint of its facts, and the check reads only the entries after it
// (at most a checkpoint's interval, 1024), whatever the ledger's length.
// A counter of a series the checkpoint knows, one it does not, and one
// the store rolled back are checked so.
func TestFirstNextReadsOnlySinceTheCheckpoint(t *testing.T) {
	const entries, interval = 3000, 1024
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			db, v := openSession(t, st, "")
			q := mustSeq(t, v, "invoice")
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() { nextN(t, q, entries/6) })
			}
			wg.Wait()
			require.NoError(t, db.Close())

			counted := countLedgerReads(st)
			_, v2 := openSession(t, counted, "")
			for series, want := range map[string]uint64{"invoice": entries + 1, "receipt": 1} {
				counted.entries.Store(0)
				n, err := mustSeq(t, v2, series).Next(ctx)
				require.NoError(t, err)
				assert.Equal(t, want, n, series)
				assert.LessOrEqual(t, counted.entries.Load(), int64(interval+2), "ledger entries read by the first Next of %s", series)
			}
		})
	}
}

// Two processes take numbers of one series; then the store deletes the
// counter, keeping the ledger. The first process's next allocation finds
// no counter where it last read or wrote one, so it asks the ledger
// again: ErrRollback, no number (its rollback pin holds the counter it
// last saw), never 1 again.
func TestCounterDroppedAfterAnotherWriterIsRollback(t *testing.T) {
	const key = "v/books/_sequences/invoice"
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			_, v1 := openSession(t, adv.Store(), "")
			q1 := mustSeq(t, v1, "invoice")
			nextN(t, q1, 2) // 1, 2: q1 checked its counter at 0
			_, v2 := openSession(t, adv.Store(), "")
			q2 := mustSeq(t, v2, "invoice")
			nextN(t, q2, 3) // 3, 4, 5
			require.NoError(t, adv.Drop(ctx, key))

			n, err := q1.Next(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.Zero(t, n, "1 was given already")
		})
	}
}

// Two processes take numbers of one series; the store then puts the
// counter back to exactly the bytes the first process last wrote, keeping
// the ledger. Its cache and pin match what it reads, so only the ledger,
// which another writer moved since the first process's last commit, tells:
// the counter is checked against it again, ErrRollback, no number.
func TestCounterPutBackAsThisProcessLeftItIsRollback(t *testing.T) {
	const key = "v/books/_sequences/invoice"
	for name, newAdv := range adversariesWithCAS() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			_, v1 := openSession(t, adv.Store(), "")
			q1 := mustSeq(t, v1, "invoice")
			nextN(t, q1, 2)
			snap, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, v2 := openSession(t, adv.Store(), "")
			q2 := mustSeq(t, v2, "invoice")
			nextN(t, q2, 3) // 3, 4, 5
			require.NoError(t, adv.Restore(ctx, snap, key))

			n, err := q1.Next(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.Zero(t, n, "3 was given already")
		})
	}
}

// The same put-back, met by the other ways to take a number: a numbered
// record and a number taken in a vault transaction.
func TestCounterPutBackAsThisProcessLeftItIsRollbackOnEveryPath(t *testing.T) {
	const key = "v/books/_sequences/invoice"
	paths := map[string]func(ctx context.Context, v *vault.Vault, q *sequence.Sequence) (uint64, error){
		"PutNumbered": func(ctx context.Context, v *vault.Vault, q *sequence.Sequence) (uint64, error) {
			var n uint64
			_, err := vault.CollectionOf[Invoice](v, "invoices").PutNumbered(ctx, sequence.NewRequestID(), q,
				func(s sequence.Serial) (Invoice, error) { n = s.N; return Invoice{Number: s.Formatted}, nil })
			if err != nil {
				n = 0
			}
			return n, err
		},
		"tx.Next": func(ctx context.Context, v *vault.Vault, q *sequence.Sequence) (uint64, error) {
			var n uint64
			err := v.Update(ctx, func(tx *vault.Tx) error {
				s, err := tx.Next(q)
				n = s.N
				return err
			})
			return n, err
		},
	}
	for name, newAdv := range adversaries() {
		for pname, take := range paths {
			t.Run(name+"/"+pname, func(t *testing.T) {
				ctx := context.Background()
				adv := newAdv(t)
				_, v1 := openSession(t, adv.Store(), "")
				q1 := mustSeq(t, v1, "invoice")
				for range 2 {
					_, err := take(ctx, v1, q1)
					require.NoError(t, err)
				}
				snap, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				_, v2 := openSession(t, adv.Store(), "")
				nextN(t, mustSeq(t, v2, "invoice"), 3) // 3, 4, 5
				require.NoError(t, adv.Restore(ctx, snap, key))

				n, err := take(ctx, v1, q1)
				assert.ErrorIs(t, err, noydb.ErrRollback)
				assert.Zero(t, n, "3 was given already")
			})
		}
	}
}

// An honest store with two processes, each taking numbers of one series by
// every path while another series moves the ledger, raises no alarm: the
// ledger moves under each process all the time, each check finds what the
// counter holds, and the numbers are exactly 1..N.
func TestLedgerMovedByAnotherWriterIsNoAlarmOnEveryPath(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			const procs, each = 2, 30
			var wg sync.WaitGroup
			got := make(chan uint64, procs*3*each)
			for range procs {
				_, v := openSession(t, st, "")
				q, other := mustSeq(t, v, "invoice"), mustSeq(t, v, "other")
				invoices := vault.CollectionOf[Invoice](v, "invoices")
				takes := []func() (uint64, error){
					func() (uint64, error) { return q.Next(ctx) },
					func() (uint64, error) {
						var n uint64
						err := v.Update(ctx, func(tx *vault.Tx) error {
							s, err := tx.Next(q)
							n = s.N
							return err
						})
						return n, err
					},
					func() (uint64, error) {
						var n uint64
						_, err := invoices.PutNumbered(ctx, sequence.NewRequestID(), q,
							func(s sequence.Serial) (Invoice, error) { n = s.N; return Invoice{Number: s.Formatted}, nil })
						return n, err
					},
				}
				for _, take := range takes {
					wg.Go(func() {
						for range each {
							n, err := take()
							if err != nil {
								t.Error(err)
								return
							}
							got <- n
						}
					})
				}
				wg.Go(func() {
					for range each {
						if _, err := other.Next(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(got)
			seen := map[uint64]bool{}
			for n := range got {
				require.False(t, seen[n], "number %d twice", n)
				seen[n] = true
			}
			for n := uint64(1); n <= procs*3*each; n++ {
				require.True(t, seen[n], "number %d missing", n)
			}
		})
	}
}

// A process whose first write of a counter had an unknown outcome (it
// committed, the store said it failed) holds no bytes of the counter.
// Another process then takes numbers and the store puts the counter back:
// to the bytes of that first write, or to no counter at all. Neither looks
// moved to the first process; the ledger, which the other process moved,
// does: ErrRollback, no number.
func TestCounterPutBackToBytesThisProcessNeverHeldIsRollback(t *testing.T) {
	const key = "v/books/_sequences/invoice"
	for name, newAdv := range adversariesWithCAS() {
		for _, absent := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/absent=%v", name, absent), func(t *testing.T) {
				ctx := context.Background()
				adv := newAdv(t)
				_, v1 := openSession(t, adv.Store(), "")
				q1 := mustSeq(t, v1, "invoice")
				snap, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				adv.FailAfterCommit(1)
				_, err = q1.Next(ctx) // takes 1, reported failed
				require.ErrorIs(t, err, faultstore.ErrInjectedAfter)
				if !absent {
					snap, err = adv.Snapshot(ctx)
					require.NoError(t, err)
				}
				_, v2 := openSession(t, adv.Store(), "")
				nextN(t, mustSeq(t, v2, "invoice"), 3) // 2, 3, 4
				require.NoError(t, adv.Restore(ctx, snap, key))

				n, err := q1.Next(ctx)
				assert.ErrorIs(t, err, noydb.ErrRollback)
				assert.Zero(t, n, "numbers up to 4 were given already")
			})
		}
	}
}
