package noydb_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Ticket is a record numbered by deferred numbering in these tests.
type Ticket struct {
	Subject string
	No      uint64 `json:"no,omitempty"`
}

// closers close a vault the two ways a user can: the DB, or the vault itself.
var closers = map[string]func(db *noydb.DB, v *vault.Vault) error{
	"db.Close": func(db *noydb.DB, _ *vault.Vault) error { return db.Close() },
	"v.Close":  func(_ *noydb.DB, v *vault.Vault) error { return v.Close() },
}

// Every handle obtained before Close (and after it) refuses with ErrClosed,
// writes nothing, and a reopened vault goes on from where Close left it.
func TestHandlesRefuseAfterClose(t *testing.T) {
	for storeName, newStore := range memAndBadger() {
		for closeName, closeVault := range closers {
			t.Run(storeName+"/"+closeName, func(t *testing.T) {
				ctx := context.Background()
				adv := faultstore.NewAdversary(newStore(t))
				dir := t.TempDir()
				db := openWithState(t, adv.Store(), dir)
				v := openVault(t, db, "books")

				seq, err := v.Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				part, err := v.Sequence("receipt", sequence.Options{Partition: []any{2026}, Format: "R-{seq}"})
				require.NoError(t, err)
				for want := uint64(1); want <= 3; want++ {
					n, err := seq.Next(ctx)
					require.NoError(t, err)
					require.Equal(t, want, n)
				}
				require.NoError(t, seq.Void(ctx, 2, "cancelled"))
				_, err = part.Next(ctx)
				require.NoError(t, err)
				l := v.Audit()
				invoices := vault.CollectionOf[Invoice](v, "invoices")
				require.NoError(t, invoices.Put(ctx, "inv-1", Invoice{Total: 1}))
				tickets := vault.CollectionOf[Ticket](v, "tickets")
				require.NoError(t, tickets.Put(ctx, "t-1", Ticket{Subject: "a"}))
				ns := ticketNumbering(t, v)
				_, err = ns.Enqueue(ctx, "t-1")
				require.NoError(t, err)

				require.NoError(t, closeVault(db, v))
				before, err := adv.Snapshot(ctx)
				require.NoError(t, err)

				late, err := v.Sequence("late", sequence.Options{}) // a handle obtained after Close
				require.NoError(t, err)
				lateC := vault.CollectionOf[Invoice](v, "late")

				closed := func(what string, err error) {
					t.Helper()
					assert.ErrorIs(t, err, noydb.ErrClosed, what)
					assert.ErrorIs(t, err, vault.ErrClosed, what)
					assert.ErrorIs(t, err, stores.ErrClosed, what)
				}
				for _, q := range []*sequence.Sequence{seq, part, late} {
					_, err = q.Next(ctx)
					closed("Next", err)
					_, err = q.NextSerial(ctx)
					closed("NextSerial", err)
					_, err = q.Claim(ctx, sequence.NewRequestID())
					closed("Claim", err)
					closed("SeedTo", q.SeedTo(ctx, 100))
					_, err = q.Bind(ctx, func(stores.Tx, sequence.Serial) error { return nil })
					closed("Bind", err)
					closed("Void", q.Void(ctx, 1, "late"))
					_, err = q.Peek(ctx)
					closed("Peek", err)
					_, err = q.Audit(ctx)
					closed("Audit", err)
				}
				_, _, err = seq.Voided(ctx, 2)
				closed("Voided", err)

				_, err = v.Record(ctx, "late", []byte("x"))
				closed("Record", err)
				_, err = l.Head(ctx)
				closed("Head", err)
				_, err = l.Verify(ctx)
				closed("Verify", err)
				n := 0
				for _, err := range l.Read(ctx, 1) {
					closed("Read", err)
					n++
				}
				assert.Equal(t, 1, n, "Read yields the error once")

				for _, c := range []*vault.Collection[Invoice]{invoices, lateC} {
					closed("Put", c.Put(ctx, "inv-2", Invoice{}))
					_, err = c.Get(ctx, "inv-1")
					closed("Get", err)
					closed("Delete", c.Delete(ctx, "inv-1"))
					_, err = c.Count(ctx)
					closed("Count", err)
					for _, err := range c.List(ctx) {
						closed("List", err)
					}
					_, err = c.PutNumbered(ctx, "inv-3", seq, func(s sequence.Serial) (Invoice, error) { return Invoice{}, nil })
					closed("PutNumbered", err)
				}

				_, err = ns.Enqueue(ctx, "t-1")
				closed("Enqueue", err)
				_, err = ns.RunPass(ctx)
				closed("RunPass", err)
				_, _, err = ns.Lookup(ctx, "t-1")
				closed("Lookup", err)
				_, err = ns.Last(ctx)
				closed("Last", err)
				_, err = ns.Pending(ctx)
				closed("Pending", err)
				for _, err := range ns.Assignments(ctx) {
					closed("Assignments", err)
				}

				after, err := adv.Snapshot(ctx)
				require.NoError(t, err)
				assert.Equal(t, before, after, "calls after Close write nothing")
				require.NoError(t, closeVault(db, v), "Close is idempotent")
				require.NoError(t, db.Close())

				// A new DB on the same store and state folder goes on at 4.
				db2 := openWithState(t, adv.Store(), dir)
				seq2, err := openVault(t, db2, "books").Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				n2, err := seq2.Next(ctx)
				require.NoError(t, err)
				assert.Equal(t, uint64(4), n2)
			})
		}
	}
}

// Callers loop Next while Close runs: every number returned was taken
// before Close returned, and is covered by the pins written to the state
// folder; every call that starts after Close returned gets ErrClosed; the
// numbers returned are exactly 1..M; nothing panics. Run with -race.
func TestCloseRacesNext(t *testing.T) {
	const callers = 16
	for storeName, newStore := range memAndBadger() {
		for closeName, closeVault := range closers {
			t.Run(storeName+"/"+closeName, func(t *testing.T) {
				ctx := context.Background()
				adv := faultstore.NewAdversary(newStore(t))
				dir := t.TempDir()
				db := openWithState(t, adv.Store(), dir)
				v := openVault(t, db, "books")
				seq, err := v.Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				n, err := seq.Next(ctx)
				require.NoError(t, err)
				require.Equal(t, uint64(1), n)
				key := seq.Key()

				// The counter's stored values, as a store could later serve them again.
				var (
					mu     sync.Mutex
					stored [][]byte
				)
				watch := func() {
					it, err := adv.Raw().Get(ctx, key)
					if err == nil {
						mu.Lock()
						if len(stored) == 0 || string(stored[len(stored)-1]) != string(it.Value) {
							stored = append(stored, it.Value)
						}
						mu.Unlock()
					}
				}
				watch()

				var (
					closeDone atomic.Bool
					wg        sync.WaitGroup
					got       = make([][]uint64, callers)
					started   = make(chan struct{}, callers)
				)
				for i := range callers {
					wg.Go(func() {
						started <- struct{}{}
						for {
							wasClosed := closeDone.Load()
							n, err := seq.Next(ctx)
							if err != nil {
								assert.ErrorIs(t, err, noydb.ErrClosed)
								return
							}
							assert.False(t, wasClosed, "a Next that started after Close returned got %d", n)
							got[i] = append(got[i], n)
							watch()
						}
					})
				}
				for range callers {
					<-started
				}
				// Let the callers take some numbers first.
				for {
					p, err := seq.Peek(ctx)
					require.NoError(t, err)
					if p >= 200 {
						break
					}
				}
				require.NoError(t, closeVault(db, v))
				closeDone.Store(true)
				wg.Wait()
				require.NoError(t, db.Close())

				all := []uint64{1}
				for _, g := range got {
					all = append(all, g...)
				}
				slices.Sort(all)
				m := uint64(len(all))
				for i, n := range all {
					require.Equal(t, uint64(i+1), n, "the numbers returned are exactly 1..%d", m)
				}

				// No number was taken that was not returned: the counter is at M.
				db2 := openWithState(t, adv.Store(), dir)
				seq2, err := openVault(t, db2, "books").Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				peek, err := seq2.Peek(ctx)
				require.NoError(t, err)
				require.Equal(t, m, peek)
				require.NoError(t, db2.Close())

				// The pins on disk cover M: the latest older counter value the
				// store held, served again, is a rollback.
				older := latestBelow(t, adv, stored, m)
				require.NoError(t, adv.Set(ctx, key, older))
				db3 := openWithState(t, adv.Store(), dir)
				seq3, err := openVault(t, db3, "books").Sequence("invoice", sequence.Options{})
				require.NoError(t, err)
				_, err = seq3.Next(ctx)
				assert.ErrorIs(t, err, noydb.ErrRollback)
			})
		}
	}
}

// latestBelow returns the last of the counter values in stored (in the order
// they were written) whose number is below m, reading each through a copy of
// the vault without a state folder.
func latestBelow(t *testing.T, adv *faultstore.Adversary, stored [][]byte, m uint64) []byte {
	t.Helper()
	ctx := context.Background()
	snap, err := adv.Snapshot(ctx)
	require.NoError(t, err)
	for i := len(stored) - 1; i >= 0; i-- {
		probe := memstore.New()
		for k, val := range snap {
			if k == "v/books/_header" || k == "v/books/_keyring/firm" {
				_, err := probe.Put(ctx, k, val)
				require.NoError(t, err)
			}
		}
		seq, err := openVault(t, openDB(t, probe, "firm", "s"), "books").Sequence("invoice", sequence.Options{})
		require.NoError(t, err)
		_, err = probe.Put(ctx, seq.Key(), stored[i])
		require.NoError(t, err)
		n, err := seq.Peek(ctx)
		require.NoError(t, err)
		if n < m {
			t.Logf("serving again the counter at %d of %d", n, m)
			return stored[i]
		}
	}
	require.Fail(t, "no older counter value seen")
	return nil
}

// Callers loop Record (an append to the ledger) while the vault closes:
// every event that returned success is in the ledger, every call that
// starts after Close returned gets ErrClosed, and the ledger verifies. Run
// with -race.
func TestCloseRacesLedgerAppend(t *testing.T) {
	const callers = 16
	for storeName, newStore := range memAndBadger() {
		t.Run(storeName, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			dir := t.TempDir()
			db := openWithState(t, st, dir)
			v := openVault(t, db, "books")
			l := v.Audit()
			var (
				closeDone atomic.Bool
				appended  atomic.Int64
				wg        sync.WaitGroup
			)
			for i := range callers {
				wg.Go(func() {
					for j := 0; ; j++ {
						wasClosed := closeDone.Load()
						_, err := v.Record(ctx, "tick", fmt.Appendf(nil, "%d-%d", i, j))
						if err != nil {
							assert.ErrorIs(t, err, noydb.ErrClosed)
							return
						}
						assert.False(t, wasClosed, "an Append that started after Close returned succeeded")
						appended.Add(1)
					}
				})
			}
			for appended.Load() < 100 {
				_, err := l.Head(ctx)
				require.NoError(t, err)
			}
			require.NoError(t, v.Close())
			closeDone.Store(true)
			wg.Wait()

			db2 := openWithState(t, st, dir)
			rep, err := openVault(t, db2, "books").Audit().Verify(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(appended.Load()), rep.Entries)
			assert.Equal(t, rep.Entries, rep.Head.Seq)
		})
	}
}

// Readers loop Get, List and Verify while the vault closes and wipes its
// key: each call returns its data or ErrClosed, never a false ErrTampered.
// Run with -race.
func TestCloseRacesReaders(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, memstore.New(), "firm", "s")
	v := openVault(t, db, "books")
	c := vault.CollectionOf[Invoice](v, "invoices")
	for i := range 20 {
		require.NoError(t, c.Put(ctx, fmt.Sprintf("inv-%02d", i), Invoice{Total: i}))
	}
	var (
		wg    sync.WaitGroup
		reads atomic.Int64
	)
	readers := map[string]func() error{
		"Get": func() error {
			got, err := c.Get(ctx, "inv-07")
			if err == nil && got.Total != 7 {
				return fmt.Errorf("got %d", got.Total)
			}
			return err
		},
		"List": func() error {
			for _, err := range c.List(ctx) {
				if err != nil {
					return err
				}
			}
			return nil
		},
		"Verify": func() error {
			_, err := v.Audit().Verify(ctx)
			return err
		},
	}
	for name, read := range readers {
		for range 4 {
			wg.Go(func() {
				for {
					err := read()
					if err != nil {
						assert.ErrorIs(t, err, noydb.ErrClosed, name)
						assert.NotErrorIs(t, err, noydb.ErrTampered, name)
						return
					}
					reads.Add(1)
				}
			})
		}
	}
	for reads.Load() < 50 {
		_, err := c.Count(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, v.Close())
	wg.Wait()
}
