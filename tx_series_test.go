package noydb_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/vault"
)

// Numbers of one series taken three ways at once (tx.Next in transactions,
// Next, PutNumbered) by two DBs of one process that share a state folder,
// so the rollback pins, while Verify and the series' Audit run alongside:
// every number from 1 to N is taken exactly once, no call fails, no
// rollback alarm is raised, and the ledger verifies after.
func TestSeriesTakenThreeWaysByTwoDBs(t *testing.T) {
	const workers, each = 6, 15
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			dir := t.TempDir()
			var ws [2]txWorld
			for i := range ws {
				v := openVault(t, openWithState(t, st, dir), "books")
				ws[i] = txWorld{st: st, v: v,
					invoices:  vault.CollectionOf[Invoice](v, "invoices"),
					customers: vault.CollectionOf[customer](v, "customers"),
					seq:       mustSeq(t, v, "inv")}
			}

			stop := make(chan struct{})
			var readers sync.WaitGroup
			for i := range ws {
				w := ws[i]
				readers.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						rep, err := w.v.Audit().Verify(ctx)
						if assert.NoError(t, err, "verify next to the writers") {
							assert.True(t, rep.OK(), "verify: %v", rep.Problem)
						}
						_, err = w.seq.Audit(ctx)
						assert.NoError(t, err, "series audit next to the writers")
					}
				})
			}

			var mu sync.Mutex
			taken := map[uint64]int{}
			var wg sync.WaitGroup
			for g := range workers {
				w := ws[g%2]
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("g%d-%d", g, i)
						var n uint64
						var err error
						switch (g + i) % 3 {
						case 0:
							err = w.v.Update(ctx, func(tx *vault.Tx) error {
								s, err := tx.Next(w.seq)
								if err != nil {
									return err
								}
								n = s.N
								return w.invoices.In(tx).Put(id, Invoice{Number: s.Formatted})
							})
						case 1:
							n, err = w.seq.Next(ctx)
						default:
							var inv Invoice
							inv, err = w.invoices.PutNumbered(ctx, id, w.seq, numberInvoice)
							if err == nil {
								n, err = strconv.ParseUint(inv.Number, 10, 64)
							}
						}
						if assert.NoError(t, err, "%s", id) {
							mu.Lock()
							taken[n]++
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			readers.Wait()

			require.Len(t, taken, workers*each)
			for n := uint64(1); n <= workers*each; n++ {
				assert.Equal(t, 1, taken[n], "number %d", n)
			}
			audit, err := ws[0].seq.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(workers*each), audit.Head)
			assert.Zero(t, audit.Missing)
			rep, err := ws[1].v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
		})
	}
}

// A transaction whose commit succeeded but reported an error (a connection
// lost at COMMIT) may have taken its number. An fn that first looks for
// what it would write, and does nothing when it is there, makes the retry
// safe: the record keeps the one number, and no number is left unused.
func TestTxRetryAfterAmbiguousCommit(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			w := newTxWorld(t, adv.Store())
			number := func(tx *vault.Tx) error {
				_, err := w.invoices.In(tx).GetRecord("inv-1")
				if !errors.Is(err, vault.ErrNotFound) {
					return err // there already (nil), or a failure
				}
				s, err := tx.Next(w.seq)
				if err != nil {
					return err
				}
				return w.invoices.In(tx).Put("inv-1", Invoice{Number: s.Formatted})
			}
			require.NoError(t, w.v.Update(ctx, func(tx *vault.Tx) error { _, err := tx.Next(w.seq); return err }))
			adv.FailAfterCommit(1)
			err := w.v.Update(ctx, number)
			require.ErrorIs(t, err, faultstore.ErrInjectedAfter)
			require.NoError(t, w.v.Update(ctx, number), "the retry")

			inv, err := w.invoices.Get(ctx, "inv-1")
			require.NoError(t, err)
			assert.Equal(t, "2", inv.Number)
			n, err := w.seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n, "one number for the record")
			audit, err := w.seq.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), audit.Head)
			assert.Zero(t, audit.Missing)
			rep, err := w.v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
		})
	}
}
