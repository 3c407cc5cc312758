package noydb_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file prove that a transaction's writes stay whole when
// one of its calls fails after it began writing, and that a number taken in
// a transaction is not refused as a rollback because the store's snapshot
// is older than a pin another DB of the process raised.

// errLedgerPut is the failure failLedgerPuts injects.
var errLedgerPut = errors.New("injected: ledger entry write refused")

// failLedgerPuts is a store whose transactions refuse to write ledger
// entries while armed: the record or counter a call wrote just before is
// then in the transaction without its entry.
type failLedgerPuts struct {
	stores.Store
	tr    stores.Transactor
	armed atomic.Bool
}

type failLedgerPutsTx struct {
	stores.Tx
	s *failLedgerPuts
}

func (t failLedgerPutsTx) Put(key string, v []byte) error {
	if t.s.armed.Load() && strings.Contains(key, "/_ledger/") && !strings.HasSuffix(key, "/head") {
		return errLedgerPut
	}
	return t.Tx.Put(key, v)
}

func (s *failLedgerPuts) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	return s.tr.Update(ctx, func(tx stores.Tx) error { return fn(failLedgerPutsTx{tx, s}) })
}

// A call of a transaction that fails after it began writing (its record or
// counter written, its ledger entry refused) fails the whole transaction,
// even when fn goes on and returns nil: no record without its entry, no
// number taken without its Allocated entry, no half of a delete.
func TestTxCallFailingAfterItWroteCommitsNothing(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			inner := newStore(t)
			st := &failLedgerPuts{Store: inner, tr: inner.(stores.Transactor)}
			w := newTxWorld(t, st)
			nextN(t, w.seq, 1)
			require.NoError(t, w.invoices.Put(ctx, "old", Invoice{Total: 7}))
			before := snapshot(t, inner)

			calls := map[string]func(tx *vault.Tx) error{
				"put":       func(tx *vault.Tx) error { return w.invoices.In(tx).Put("a", Invoice{Total: 1}) },
				"put if":    func(tx *vault.Tx) error { return w.invoices.In(tx).PutIf("a", Invoice{Total: 1}, 0) },
				"delete":    func(tx *vault.Tx) error { return w.invoices.In(tx).Delete("old") },
				"delete if": func(tx *vault.Tx) error { return w.invoices.In(tx).DeleteIf("old", 1) },
				"next":      func(tx *vault.Tx) error { _, err := tx.Next(w.seq); return err },
			}
			for call, do := range calls {
				st.armed.Store(true)
				var callErr error
				err := w.v.Update(ctx, func(tx *vault.Tx) error {
					callErr = do(tx)
					return nil // an fn that ignores the failure
				})
				st.armed.Store(false)
				assert.ErrorIs(t, callErr, errLedgerPut, call)
				assert.ErrorIs(t, err, errLedgerPut, "%s: the transaction fails with the call's error", call)
				assert.Equal(t, before, snapshot(t, inner), "%s: nothing written", call)
			}

			n, err := w.seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n, "no number taken")
			audit, err := w.seq.Audit(ctx)
			require.NoError(t, err)
			assert.Zero(t, audit.Missing, "no number without its ledger entry")
			_, err = w.invoices.Get(ctx, "a")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			assert.Len(t, ledgerEntries(t, w.v, ledger.RecordPut, "invoices", "old"), 1)

			// A refusal before writing (a conflict) leaves the transaction
			// going: fn decides.
			require.NoError(t, w.v.Update(ctx, func(tx *vault.Tx) error {
				err := w.invoices.In(tx).PutIf("old", Invoice{Total: 8}, 5)
				assert.ErrorIs(t, err, vault.ErrConflict)
				_, err = tx.Next(w.seq)
				return err
			}))
			n, err = w.seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n)
			rep, err := w.v.Audit().Verify(ctx)
			require.NoError(t, err)
			assert.True(t, rep.OK())
		})
	}
}

// Two DBs of one process share the state folder, so the rollback pins of
// the vault. A number the second takes while a transaction of the first is
// open raises the shared pin above the counter in that transaction's
// snapshot (badger reads from one): that is a stale snapshot, not a
// rollback. The transaction runs again and takes the next number.
func TestTxNextOnStaleSnapshotIsNoRollback(t *testing.T) {
	ctx := context.Background()
	adv := faultstore.NewAdversary(memAndBadger()["badgerstore"](t))
	dir := t.TempDir()
	v1 := openVault(t, openWithState(t, adv.Store(), dir), "books")
	v2 := openVault(t, openWithState(t, adv.Raw(), dir), "books")
	s1, s2 := mustSeq(t, v1, "inv"), mustSeq(t, v2, "inv")
	nextN(t, s1, 1)
	nextN(t, s2, 1)
	require.NoError(t, v1.Update(ctx, func(tx *vault.Tx) error { _, err := tx.Next(s1); return err }))

	adv.InNextTransaction(func() {
		n, err := s2.Next(ctx)
		assert.NoError(t, err)
		assert.Equal(t, uint64(4), n)
	})
	var got uint64
	err := v1.Update(ctx, func(tx *vault.Tx) error {
		s, err := tx.Next(s1)
		got = s.N
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), got)
	audit, err := s1.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), audit.Head)
	assert.Zero(t, audit.Missing)
	rep, err := v1.Audit().Verify(ctx)
	require.NoError(t, err)
	assert.True(t, rep.OK())
}

// A counter the store really rolled back is still refused in a
// transaction, with ErrRollback, and nothing is written.
func TestTxNextOnRolledBackCounter(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			v := openVault(t, openWithState(t, adv.Store(), t.TempDir()), "books")
			seq := mustSeq(t, v, "inv")
			nextN(t, seq, 2)
			old, err := adv.Raw().Get(ctx, seq.Key())
			require.NoError(t, err)
			nextN(t, seq, 3)
			require.NoError(t, adv.Set(ctx, seq.Key(), old.Value))
			before := snapshot(t, adv.Raw())

			runs := 0
			err = v.Update(ctx, func(tx *vault.Tx) error {
				runs++
				_, err := tx.Next(seq)
				return err
			})
			assert.ErrorIs(t, err, vault.ErrRollback)
			assert.LessOrEqual(t, runs, 3, "decided without spending a retry budget")
			assert.Equal(t, before, snapshot(t, adv.Raw()), "nothing written")
		})
	}
}

// A transaction whose context is cancelled while fn runs, after it took a
// number and wrote its record, commits both or neither: the record is there
// exactly when the number is taken, and the ledger verifies.
func TestTxContextCancelledInsideFn(t *testing.T) {
	for name, newStore := range txStores() {
		t.Run(name, func(t *testing.T) {
			w := newTxWorld(t, newStore(t))
			nextN(t, w.seq, 1)
			ctx, cancel := context.WithCancel(context.Background())
			err := w.v.Update(ctx, func(tx *vault.Tx) error {
				s, err := tx.Next(w.seq)
				if err != nil {
					return err
				}
				if err := w.invoices.In(tx).Put("a", Invoice{Number: s.Formatted}); err != nil {
					return err
				}
				cancel()
				return nil
			})
			cancel()
			bg := context.Background()
			n, perr := w.seq.Peek(bg)
			require.NoError(t, perr)
			inv, gerr := w.invoices.Get(bg, "a")
			if err == nil {
				require.NoError(t, gerr)
				assert.Equal(t, "2", inv.Number)
				assert.Equal(t, uint64(2), n)
			} else {
				assert.ErrorIs(t, err, context.Canceled)
				assert.ErrorIs(t, gerr, vault.ErrNotFound)
				assert.Equal(t, uint64(1), n, "no number without its record")
			}
			audit, aerr := w.seq.Audit(bg)
			require.NoError(t, aerr)
			assert.Zero(t, audit.Missing)
			rep, verr := w.v.Audit().Verify(bg)
			require.NoError(t, verr)
			assert.True(t, rep.OK())
		})
	}
}

// A device with no pins (no state folder, a fresh DB) still refuses, in a
// transaction, a counter the store rolled back below what the ledger
// records, with ErrRollback, and writes nothing.
func TestTxNextOnCounterBehindLedger(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			v1 := openVault(t, openDB(t, adv.Store(), "firm", "s"), "books")
			seq1 := mustSeq(t, v1, "inv")
			nextN(t, seq1, 2)
			old, err := adv.Raw().Get(ctx, seq1.Key())
			require.NoError(t, err)
			nextN(t, seq1, 3)
			require.NoError(t, v1.Close())
			require.NoError(t, adv.Set(ctx, seq1.Key(), old.Value))
			before := snapshot(t, adv.Raw())

			v2 := openVault(t, openDB(t, adv.Store(), "firm", "s"), "books")
			seq2 := mustSeq(t, v2, "inv")
			runs := 0
			err = v2.Update(ctx, func(tx *vault.Tx) error {
				runs++
				_, err := tx.Next(seq2)
				return err
			})
			assert.ErrorIs(t, err, vault.ErrRollback)
			assert.LessOrEqual(t, runs, 3)
			assert.Equal(t, before, snapshot(t, adv.Raw()), "nothing written")
		})
	}
}
