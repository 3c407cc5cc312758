package noydb_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file prove the vault's multi-record transactions
// (v.Update): all of it commits, with its ledger entries and its numbers,
// or none of it does.

// customer is a record of the second collection the transactions write.
type customer struct {
	Name     string
	Invoices int
}

// commitFailer is a store whose transactions fail at their commit, after
// their function ran and wrote, while armed: the inner store rolls them
// back. It is how a store refusing a commit (a lost connection, a full disk)
// looks to the SDK.
type commitFailer struct {
	stores.Store
	tr    stores.Transactor
	armed atomic.Bool
}

var errCommitRefused = errors.New("injected: commit refused")

func (s *commitFailer) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.tr.Update(ctx, func(tx stores.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if s.armed.Load() {
			return errCommitRefused
		}
		return nil
	})
}

// txWorld is a vault with two collections and a sequence.
type txWorld struct {
	st        stores.Store
	v         *vault.Vault
	invoices  *vault.Collection[Invoice]
	customers *vault.Collection[customer]
	seq       *sequence.Sequence
}

func newTxWorld(t *testing.T, st stores.Store) txWorld {
	t.Helper()
	v := openVault(t, openDB(t, st, "firm", "s"), "books")
	return txWorld{
		st: st, v: v,
		invoices:  vault.CollectionOf[Invoice](v, "invoices"),
		customers: vault.CollectionOf[customer](v, "customers"),
		seq:       mustSeq(t, v, "inv"),
	}
}

// invoice is the transaction the tests run: number an invoice, store it,
// and count it on its customer, in one commit.
func (w txWorld) invoice(tx *vault.Tx, id, cust string, total int) error {
	s, err := tx.Next(w.seq)
	if err != nil {
		return err
	}
	if err := w.invoices.In(tx).Put(id, Invoice{Number: s.Formatted, Customer: cust, Total: total}); err != nil {
		return err
	}
	c, err := w.customers.In(tx).GetRecord(cust)
	if errors.Is(err, vault.ErrNotFound) {
		return w.customers.In(tx).PutIf(cust, customer{Name: cust, Invoices: 1}, 0)
	}
	if err != nil {
		return err
	}
	c.Value.Invoices++
	return w.customers.In(tx).PutIf(cust, c.Value, c.Revision)
}

// A transaction commits its records, its number and their ledger entries
// together; numbers taken in transactions and by Next follow each other.
func TestTxCommits(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := newTxWorld(t, newStore(t))
			nextN(t, w.seq, 1)
			require.NoError(t, w.v.Update(ctx, func(tx *vault.Tx) error { return w.invoice(tx, "i-a", "acme", 10) }))
			require.NoError(t, w.v.Update(ctx, func(tx *vault.Tx) error { return w.invoice(tx, "i-b", "acme", 20) }))
			n, err := w.seq.Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(4), n, "Next continues after the numbers taken in transactions")

			a, err := w.invoices.Get(ctx, "i-a")
			require.NoError(t, err)
			assert.Equal(t, "2", a.Number)
			b, err := w.invoices.Get(ctx, "i-b")
			require.NoError(t, err)
			assert.Equal(t, "3", b.Number)
			c, err := w.customers.GetRecord(ctx, "acme")
			require.NoError(t, err)
			assert.Equal(t, customer{Name: "acme", Invoices: 2}, c.Value)
			assert.Equal(t, uint64(2), c.Revision)

			rep, err := w.v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
			var kinds []string
			for e, err := range w.v.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				kinds = append(kinds, e.Kind.String()+" "+e.Collection+e.ID)
			}
			alloc, put := ledger.NumberAllocated.String(), ledger.RecordPut.String()
			assert.Equal(t, []string{
				alloc + " ",
				alloc + " ", put + " invoicesi-a", put + " customersacme",
				alloc + " ", put + " invoicesi-b", put + " customersacme",
				alloc + " ",
			}, kinds)
			audit, err := w.seq.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(4), audit.Head)
		})
	}
}

// A transaction that fails halfway, after two puts and a Next (its
// function returns an error, panics, or the store refuses its commit),
// leaves nothing behind: no record, the counter where it was, the ledger
// head unchanged, the store byte for byte as before.
func TestTxFailsHalfway(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newStore(t)
			st := &commitFailer{Store: inner, tr: inner.(stores.Transactor)}
			w := newTxWorld(t, st)
			nextN(t, w.seq, 3)
			require.NoError(t, w.v.Update(ctx, func(tx *vault.Tx) error { return w.invoice(tx, "i-0", "acme", 1) }))
			head, err := w.v.Audit().Head(ctx)
			require.NoError(t, err)
			before := snapshot(t, inner)

			boom := errors.New("boom")
			halfway := func(tx *vault.Tx) error {
				if err := w.invoices.In(tx).Put("i-x", Invoice{Total: 1}); err != nil {
					return err
				}
				if err := w.customers.In(tx).Put("globex", customer{Name: "globex"}); err != nil {
					return err
				}
				if _, err := tx.Next(w.seq); err != nil {
					return err
				}
				return boom
			}
			assert.Same(t, boom, w.v.Update(ctx, halfway), "fn's error as it is")
			assert.PanicsWithValue(t, "halfway", func() {
				_ = w.v.Update(ctx, func(tx *vault.Tx) error {
					if err := halfway(tx); !errors.Is(err, boom) {
						return err
					}
					panic("halfway")
				})
			})
			st.armed.Store(true)
			err = w.v.Update(ctx, func(tx *vault.Tx) error {
				if err := halfway(tx); !errors.Is(err, boom) {
					return err
				}
				return w.invoice(tx, "i-y", "acme", 2)
			})
			assert.ErrorIs(t, err, errCommitRefused)
			st.armed.Store(false)

			for _, id := range []string{"i-x", "i-y"} {
				_, err := w.invoices.Get(ctx, id)
				assert.ErrorIs(t, err, vault.ErrNotFound, id)
			}
			_, err = w.customers.Get(ctx, "globex")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			n, err := w.seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(4), n, "no number taken")
			got, err := w.v.Audit().Head(ctx)
			require.NoError(t, err)
			assert.True(t, head.Equal(got), "ledger head unchanged")
			assert.Equal(t, before, snapshot(t, inner), "nothing written")

			// The vault goes on: the next number is the next one.
			require.NoError(t, w.v.Update(ctx, func(tx *vault.Tx) error { return w.invoice(tx, "i-z", "acme", 3) }))
			z, err := w.invoices.Get(ctx, "i-z")
			require.NoError(t, err)
			assert.Equal(t, "5", z.Number)
			rep, err := w.v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
		})
	}
}

// A commit refused before the transaction's function runs (faultstore's
// Before hook on the store's Update) leaves nothing behind either.
func TestTxRefusedByFaultstore(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newStore(t)
			var armed atomic.Bool
			st := faultstore.New(inner, faultstore.Options{Before: func(op faultstore.Op, _ string) error {
				if op == faultstore.OpUpdate && armed.Load() {
					return faultstore.ErrInjected
				}
				return nil
			}})
			w := newTxWorld(t, st)
			nextN(t, w.seq, 1)
			before := snapshot(t, inner)
			armed.Store(true)
			err := w.v.Update(ctx, func(tx *vault.Tx) error { return w.invoice(tx, "i-1", "acme", 1) })
			assert.ErrorIs(t, err, faultstore.ErrInjected)
			armed.Store(false)
			assert.Equal(t, before, snapshot(t, inner))
			n, err := w.seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
		})
	}
}

// Concurrent transactions numbering invoices of a few customers: every
// number from 1 to N is on exactly one invoice, and each customer counts
// exactly its invoices.
func TestTxConcurrentExact(t *testing.T) {
	const workers, each = 16, 20
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := newTxWorld(t, newStore(t))
			custs := []string{"acme", "globex", "initech"}
			var wg sync.WaitGroup
			for g := range workers {
				wg.Go(func() {
					for i := range each {
						id := string(rune('a'+g)) + "-" + string(rune('a'+i))
						err := w.v.Update(ctx, func(tx *vault.Tx) error { return w.invoice(tx, id, custs[(g+i)%3], 1) })
						assert.NoError(t, err)
					}
				})
			}
			wg.Wait()
			seen := map[string]bool{}
			for r, err := range w.invoices.List(ctx) {
				require.NoError(t, err)
				assert.False(t, seen[r.Value.Number], "number %s twice", r.Value.Number)
				seen[r.Value.Number] = true
			}
			require.Len(t, seen, workers*each)
			for n := 1; n <= workers*each; n++ {
				assert.True(t, seen[w.seq.Format(uint64(n))], "number %d", n)
			}
			total := 0
			for _, c := range custs {
				r, err := w.customers.Get(ctx, c)
				require.NoError(t, err)
				total += r.Invoices
			}
			assert.Equal(t, workers*each, total)
			rep, err := w.v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
		})
	}
}

// Two DBs of one process on one store (two writers that share no batch):
// Updates of one record from both, and numbers taken from both in
// transactions and by Next, mixed. The count is exact, every number from 1
// to N is taken exactly once, and the ledger verifies.
func TestUpdateAndTxAcrossTwoDBs(t *testing.T) {
	const workers, each = 8, 25
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			w1 := newTxWorld(t, st)
			w2 := newTxWorld(t, st)
			counters := []*vault.Collection[counterRec]{
				vault.CollectionOf[counterRec](w1.v, "counters"),
				vault.CollectionOf[counterRec](w2.v, "counters"),
			}
			require.NoError(t, counters[0].Put(ctx, "c", counterRec{}))

			var mu sync.Mutex
			taken := map[uint64]int{}
			var wg sync.WaitGroup
			for g := range workers {
				w := []txWorld{w1, w2}[g%2]
				wg.Go(func() {
					for i := range each {
						_, err := counters[g%2].Update(ctx, "c", func(r *counterRec) error { r.Count++; return nil })
						assert.NoError(t, err)
						var n uint64
						if i%2 == 0 {
							err = w.v.Update(ctx, func(tx *vault.Tx) error {
								s, err := tx.Next(w.seq)
								n = s.N
								return err
							})
						} else {
							n, err = w.seq.Next(ctx)
						}
						if assert.NoError(t, err) {
							mu.Lock()
							taken[n]++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			r, err := counters[1].GetRecord(ctx, "c")
			require.NoError(t, err)
			assert.Equal(t, workers*each, r.Value.Count)
			require.Len(t, taken, workers*each)
			for n := uint64(1); n <= workers*each; n++ {
				assert.Equal(t, 1, taken[n], "number %d", n)
			}
			peek, err := w2.seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(workers*each), peek)
			rep, err := w1.v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
			audit, err := w1.seq.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(workers*each), audit.Head)
		})
	}
}

// One transaction may take several numbers of several sequences: they
// follow each other per sequence, and all commit together.
func TestTxSeveralNumbers(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := newTxWorld(t, newStore(t))
			other := mustSeq(t, w.v, "credit-notes")
			var got []uint64
			require.NoError(t, w.v.Update(ctx, func(tx *vault.Tx) error {
				got = got[:0]
				for _, q := range []*sequence.Sequence{w.seq, other, w.seq, w.seq} {
					s, err := tx.Next(q)
					if err != nil {
						return err
					}
					got = append(got, s.N)
				}
				return nil
			}))
			assert.Equal(t, []uint64{1, 1, 2, 3}, got)
			n, err := w.seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), n)
			n, err = other.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
			audit, err := w.seq.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(3), audit.Head)
		})
	}
}
