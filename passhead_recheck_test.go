package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores"
)

// Two processes number one series by passes; the store then puts the
// pass state back to exactly the bytes the first process last wrote,
// keeping the ledger, which records the other process's numbers. The first
// process's next pass checks its head against the ledger before it plans
// (every pass does, whatever bytes it reads): ErrRollback, no number; with
// the counter put back too, the same.
func TestPassHeadPutBackAsThisProcessLeftItIsRollback(t *testing.T) {
	for name, newAdv := range adversaries() {
		for _, counterToo := range []bool{false, true} {
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				adv := newAdv(t)
				_, v1 := openSession(t, adv.Store(), t.TempDir())
				c1, h1 := stubsOf(t, v1)
				handOff(t, c1, h1, "a", "b")
				_, err := h1.Settle(ctx)
				require.NoError(t, err)
				snap, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				_, v2 := openSession(t, adv.Store(), t.TempDir())
				c2, h2 := stubsOf(t, v2)
				handOff(t, c2, h2, "c", "d")
				rep, err := h2.Settle(ctx)
				require.NoError(t, err)
				require.Equal(t, uint64(4), rep.Last)
				require.NoError(t, adv.Restore(ctx, snap, passStateOf))
				if counterToo {
					require.NoError(t, adv.Restore(ctx, snap, "v/books/_sequences/"))
				}

				handOff(t, c1, h1, "e")
				rep, err = h1.Settle(ctx)
				assert.ErrorIs(t, err, noydb.ErrRollback)
				assert.Zero(t, rep.First, "3 and 4 were given already")
				got, err := h1.Get(ctx, "e")
				require.NoError(t, err)
				assert.Zero(t, got.Serial.N, "e has no number")
			})
		}
	}
}

// beforeGet is a store that runs a function once, outside any transaction,
// when a key is first read after it is armed: a step of another process
// (and of the store) between two steps of a call. Over a store with
// transactions, make it with beforeGetOf.
type beforeGet struct {
	stores.Store
	tr   stores.Transactor
	key  string
	hook atomic.Pointer[func()]
}

// beforeGetNoTx is beforeGet over a store without transactions.
type beforeGetNoTx struct {
	stores.Store
	b *beforeGet
}

func (s *beforeGetNoTx) Get(ctx context.Context, key string) (stores.Item, error) {
	return s.b.Get(ctx, key)
}

// beforeGetOf returns a beforeGet over st reading key, and st as the
// vault sees it: with transactions only when st has them.
func beforeGetOf(st stores.Store, key string) (*beforeGet, stores.Store) {
	tr, ok := st.(stores.Transactor)
	b := &beforeGet{Store: st, tr: tr, key: key}
	if ok && st.Capabilities().Transactions {
		return b, b
	}
	return b, &beforeGetNoTx{Store: st, b: b}
}

func (s *beforeGet) Get(ctx context.Context, key string) (stores.Item, error) {
	if key == s.key {
		if fn := s.hook.Swap(nil); fn != nil {
			(*fn)()
		}
	}
	return s.Store.Get(ctx, key)
}

func (s *beforeGet) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.tr.Update(ctx, fn)
}

// While a pass plans its batch (after it checked its heads against the
// ledger, before it commits), another process takes numbers of the series
// at write time and the store puts the series' counter back to the bytes
// the pass read, keeping the ledger. The pass's commit, which holds its
// heads and the ledger in one transaction, finds the ledger moved past
// its check by numbers above its heads: ErrRollback, no number, nothing
// committed. (Before, the batch took numbers 3..5 again with no error.)
// PostgreSQL needs scripts/with-postgres.
func TestPassHeadsPutBackWhileThePassPlansIsRollback(t *testing.T) {
	const counterKey = "v/books/_sequences/ticket"
	for name, open := range oneSeriesStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := faultstore.NewAdversary(open(t))
			st := &beforeGet{Store: adv.Store(), tr: adv.Store().(stores.Transactor), key: "v/books/tickets/e"}
			_, v1 := openSession(t, st, t.TempDir())
			c1, h1 := stubsOf(t, v1)
			handOff(t, c1, h1, "a", "b")
			_, err := h1.Settle(ctx)
			require.NoError(t, err)
			handOff(t, c1, h1, "e")
			snap, err := adv.Snapshot(ctx)
			require.NoError(t, err)

			_, v2 := openSession(t, adv.Store(), t.TempDir())
			q2 := mustSeq(t, v2, "ticket")
			hook := func() {
				for want := uint64(3); want <= 5; want++ {
					n, err := q2.Next(ctx)
					require.NoError(t, err)
					require.Equal(t, want, n)
				}
				require.NoError(t, adv.Restore(ctx, snap, counterKey))
			}
			st.hook.Store(&hook)
			rep, err := h1.Settle(ctx)
			require.Nil(t, st.hook.Load(), "the pass read e")
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.Zero(t, rep.First, "3 to 5 were given already")
			got, err := h1.Get(ctx, "e")
			require.NoError(t, err)
			assert.Zero(t, got.Serial.N, "e has no number")
		})
	}
}

// An honest store with two processes, each running passes of one series
// and taking numbers of it at write time, while the ledger moves under
// each all the time, raises no alarm: every number 1..N exactly once,
// given by Next or stamped by a pass. PostgreSQL needs
// scripts/with-postgres.
func TestPassesAndNextOfTwoProcessesAreNoAlarm(t *testing.T) {
	for name, newStore := range oneSeriesStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			const procs, each = 2, 12
			var wg sync.WaitGroup
			var mu sync.Mutex
			next := map[uint64]int{}
			for p := range procs {
				_, v := openSession(t, st, t.TempDir())
				c, h := stubsOf(t, v)
				q := mustSeq(t, v, "ticket")
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("p%d-%02d", p, i)
						if !assert.NoError(t, c.Put(ctx, id, Stub{Total: i})) {
							return
						}
						if _, err := h.Series().Enqueue(ctx, id); !assert.NoError(t, err) {
							return
						}
					}
				})
				wg.Go(func() {
					for range each {
						n, err := q.Next(ctx)
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						next[n]++
						mu.Unlock()
					}
				})
				wg.Go(func() {
					for range each / 2 {
						_, err := h.Settle(ctx)
						if err != nil && !errors.Is(err, numbering.ErrPassRunning) {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			_, v := openSession(t, st, t.TempDir())
			c, h := stubsOf(t, v)
			_, err := h.Settle(ctx)
			require.NoError(t, err)
			seen := map[uint64]string{}
			for n, k := range next {
				require.Equal(t, 1, k, "Next gave %d %d times", n, k)
				seen[n] = "Next"
			}
			records := 0
			for r, err := range c.List(ctx) {
				require.NoError(t, err)
				records++
				got, err := h.Get(ctx, r.ID)
				require.NoError(t, err)
				require.NotZero(t, got.Serial.N, "%s has its number", r.ID)
				require.Empty(t, seen[got.Serial.N], "number %d given to %s and %s", got.Serial.N, r.ID, seen[got.Serial.N])
				seen[got.Serial.N] = r.ID
			}
			require.Equal(t, procs*each, records)
			for n := uint64(1); n <= 2*procs*each; n++ {
				require.NotEmpty(t, seen[n], "number %d missing", n)
			}
			audit, err := h.Audit(ctx)
			require.NoError(t, err)
			// Next's numbers are bound to no record; none is missing or
			// given twice.
			assert.Zero(t, audit.Online.Missing+audit.Online.Orphaned+audit.Deferred.Missing, "%+v", audit)
			assert.Empty(t, audit.Deferred.Reused, "%+v", audit)
			assert.Empty(t, audit.Deferred.Renumbered, "%+v", audit)
		})
	}
}

// While a pass plans its batch, another process appends more entries to
// the ledger than a commit reads in its transaction (numbers of another
// series). The pass checks its heads against the ledger again, outside,
// and commits: no alarm, e gets number 3.
func TestPassWhileTheLedgerMovesFarIsNoAlarm(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			raw := newStore(t)
			st, seen := beforeGetOf(raw, "v/books/tickets/e")
			_, v1 := openSession(t, seen, t.TempDir())
			c1, h1 := stubsOf(t, v1)
			handOff(t, c1, h1, "a", "b", "e")
			_, v2 := openSession(t, raw, t.TempDir())
			other := mustSeq(t, v2, "other")
			hook := func() { nextN(t, other, ledger.MaxFactsAfterTx+10) }
			st.hook.Store(&hook)
			rep, err := h1.Settle(ctx)
			require.NoError(t, err)
			require.Nil(t, st.hook.Load(), "the pass read e")
			assert.Equal(t, uint64(3), rep.Last)
			got, err := h1.Get(ctx, "e")
			require.NoError(t, err)
			assert.NotZero(t, got.Serial.N)
		})
	}
}
