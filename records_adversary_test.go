package noydb_test

// Records and deferred numbering against a store that lies (issue 10, items
// 9, 10, 11, 12 and the nil build of 16), on memstore and on badger.

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// adversaryStores returns the inner stores the adversary tests wrap.
// advVault opens vault "books" on an adversary over a fresh inner store.
func advVault(t *testing.T, newStore func(testing.TB) stores.Store) (*faultstore.Adversary, *vault.Vault) {
	t.Helper()
	adv := faultstore.NewAdversary(newStore(t))
	return adv, openVault(t, openDB(t, adv.Store(), "firm", "s"), "books")
}

// ledgerEntries returns the ledger entries of kind about collection/id.
func ledgerEntries(t *testing.T, v *vault.Vault, kind ledger.Kind, collection, id string) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		if e.Kind == kind && e.Collection == collection && e.ID == id {
			out = append(out, e)
		}
	}
	return out
}

func numberInvoice(s sequence.Serial) (Invoice, error) {
	return Invoice{Number: s.Formatted, Customer: "Rossi"}, nil
}

// Item 11: a PutNumbered whose commit succeeded but reported an error,
// retried with the same id, returns the number the record got and takes no
// other: the audit shows no unbound and no orphaned number.
func TestAdversaryPutNumberedRetryAfterAmbiguousCommit(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, v := advVault(t, newStore)
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			seq, err := v.Sequence("inv", sequence.Options{})
			require.NoError(t, err)

			adv.FailAfterCommit(1)
			_, err = invoices.PutNumbered(ctx, "inv-1", seq, numberInvoice)
			require.ErrorIs(t, err, faultstore.ErrInjectedAfter, "the commit is reported failed")

			inv, err := invoices.PutNumbered(ctx, "inv-1", seq, numberInvoice) // the caller's retry
			require.NoError(t, err)
			assert.Equal(t, "1", inv.Number, "the retry returns the number the record got")
			got, err := invoices.Get(ctx, "inv-1")
			require.NoError(t, err)
			assert.Equal(t, "1", got.Number)

			inv, err = invoices.PutNumbered(ctx, "inv-2", seq, numberInvoice)
			require.NoError(t, err)
			assert.Equal(t, "2", inv.Number, "no number was spent by the retry")

			head, err := seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), head)
			rep, err := seq.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, 0, rep.Unbound)
			assert.Equal(t, 0, rep.Orphaned)
			assert.Equal(t, 2, rep.Bound)
			assert.Len(t, ledgerEntries(t, v, ledger.RecordPut, "invoices", "inv-1"), 1, "one RecordPut for inv-1")
		})
	}
}

// A record keeps its number: Put changes its content and keeps the number, a
// later PutNumbered returns it, and only after Delete does the id get a new one.
func TestPutNumberedKeepsNumberAcrossPut(t *testing.T) {
	ctx := context.Background()
	v := openVault(t, openDB(t, memstore.New(), "firm", "s"), "books")
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)

	_, err = invoices.PutNumbered(ctx, "a", seq, numberInvoice)
	require.NoError(t, err)
	require.NoError(t, invoices.Put(ctx, "a", Invoice{Number: "1", Customer: "Rossi", Total: 70}))
	inv, err := invoices.PutNumbered(ctx, "a", seq, func(sequence.Serial) (Invoice, error) {
		t.Fatal("build must not run for a record that has its number")
		return Invoice{}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, Invoice{Number: "1", Customer: "Rossi", Total: 70}, inv, "the stored record")

	// Another series numbers the same record independently.
	other, err := v.Sequence("delivery", sequence.Options{})
	require.NoError(t, err)
	_, err = invoices.PutNumbered(ctx, "a", other, func(s sequence.Serial) (Invoice, error) {
		return Invoice{Number: "1", Customer: "Rossi", Total: 70, Notes: "delivery " + s.Formatted}, nil
	})
	require.NoError(t, err)
	inv, err = invoices.PutNumbered(ctx, "a", seq, numberInvoice)
	require.NoError(t, err)
	assert.Equal(t, "delivery 1", inv.Notes, "still number 1 of inv, now also 1 of delivery")

	require.NoError(t, invoices.Delete(ctx, "a"))
	inv, err = invoices.PutNumbered(ctx, "a", seq, numberInvoice)
	require.NoError(t, err)
	assert.Equal(t, "2", inv.Number, "a deleted record's id gets a new number")
	head, err := seq.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), head)
}

// Item 16: a nil build function (or sequence) is refused with a typed error;
// nothing is written and no number taken.
func TestPutNumberedNilArguments(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	v := openVault(t, openDB(t, st, "firm", "s"), "books")
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	before := snapshot(t, st)

	_, err = invoices.PutNumbered(ctx, "a", seq, nil)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	_, err = invoices.PutNumbered(ctx, "a", nil, numberInvoice)
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	assert.Equal(t, before, snapshot(t, st), "nothing written")
	head, err := seq.Peek(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(0), head, "no number taken")
}

// Item 12: the revision a write follows comes from the authenticated
// previous value. A store that forges the clear revision (to MaxUint64, to
// make it wrap, or to any other value) gets ErrTampered and nothing written.
func TestAdversaryForgedRevisionRefused(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, v := advVault(t, newStore)
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			const key = "v/books/invoices/a"
			require.NoError(t, invoices.Put(ctx, "a", Invoice{Total: 1}))
			require.NoError(t, invoices.Put(ctx, "a", Invoice{Total: 2})) // revision 2

			for _, forged := range []uint64{math.MaxUint64, 7} {
				it, err := adv.Raw().Get(ctx, key)
				require.NoError(t, err)
				env := append([]byte(nil), it.Value...)
				relabel(t, env, 2, forged)
				require.NoError(t, adv.Set(ctx, key, env))
				before := snapshot(t, adv.Raw())

				err = invoices.Put(ctx, "a", Invoice{Total: 3})
				assert.ErrorIs(t, err, noydb.ErrTampered, "put over revision %d", forged)
				err = invoices.Delete(ctx, "a")
				assert.ErrorIs(t, err, noydb.ErrTampered, "delete over revision %d", forged)
				assert.Equal(t, before, snapshot(t, adv.Raw()), "nothing written over revision %d", forged)

				require.NoError(t, adv.Set(ctx, key, it.Value)) // put the true value back
			}
			require.NoError(t, invoices.Put(ctx, "a", Invoice{Total: 3}))
			for r, err := range invoices.List(ctx) {
				require.NoError(t, err)
				assert.Equal(t, uint64(3), r.Revision)
			}
			puts := ledgerEntries(t, v, ledger.RecordPut, "invoices", "a")
			require.Len(t, puts, 3)
			assert.Equal(t, uint64(3), puts[2].Revision)
		})
	}
}

// Item 10: a List that yields keys outside the collection gives
// stores.ErrMisbehaving from List and Count, never a panic or a count.
func TestAdversaryListOutsideCollection(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for _, key := range []string{"v/b", "v/books/receipts/x"} {
				t.Run(key, func(t *testing.T) {
					adv, v := advVault(t, newStore)
					invoices := vault.CollectionOf[Invoice](v, "invoices")
					require.NoError(t, invoices.Put(ctx, "a", Invoice{Total: 1}))
					adv.InjectList("v/books/invoices/", stores.Item{Key: key, Value: []byte("x")})

					var listErr error
					for _, err := range invoices.List(ctx) {
						if err != nil {
							listErr = err
						}
					}
					assert.ErrorIs(t, listErr, stores.ErrMisbehaving)
					n, err := invoices.Count(ctx)
					assert.ErrorIs(t, err, stores.ErrMisbehaving)
					assert.Zero(t, n)
				})
			}
		})
	}
}

type Receipt struct {
	Number uint64
	Total  int
}

// receiptSeries returns v's receipts and the deferred numbering series that
// stamps their Number field.
func receiptSeries(t *testing.T, v *vault.Vault) (*vault.Collection[Receipt], *numbering.Series) {
	t.Helper()
	receipts := vault.CollectionOf[Receipt](v, "receipts")
	h, err := vault.NumberingOf(receipts, "receipts", sequence.Options{}, func(r *Receipt, s sequence.Serial) { r.Number = s.N })
	require.NoError(t, err)
	return receipts, h.Series()
}

// numberOne puts the receipt id, numbers it with a pass, and returns the
// store as it was before the stamp.
func numberOne(t *testing.T, adv *faultstore.Adversary, receipts *vault.Collection[Receipt], series *numbering.Series, id string) faultstore.Snapshot {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, receipts.Put(ctx, id, Receipt{Total: 10}))
	unstamped, err := adv.Snapshot(ctx)
	require.NoError(t, err)
	_, err = series.Enqueue(ctx, id)
	require.NoError(t, err)
	_, err = series.RunPass(ctx)
	require.NoError(t, err)
	return unstamped
}

// numberedReceipts puts and numbers r-1 (1) and r-2 (2) and returns the series.
func numberedReceipts(t *testing.T, v *vault.Vault) (*vault.Collection[Receipt], *numbering.Series) {
	t.Helper()
	ctx := context.Background()
	receipts, series := receiptSeries(t, v)
	for _, id := range []string{"r-1", "r-2"} {
		require.NoError(t, receipts.Put(ctx, id, Receipt{Total: 10}))
		_, err := series.Enqueue(ctx, id)
		require.NoError(t, err)
	}
	rep, err := series.RunPass(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Assigned)
	return receipts, series
}

// Item 9: with its assigned index deleted, a numbered record still refuses a
// second number: Enqueue says it is numbered, and a pass that finds it
// pending (an entry the store kept or replayed) skips it. It keeps its
// number, the ledger gets no second NumberAssigned, and Audit is clean.
func TestAdversaryNumberingIndexDeleted(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, v := advVault(t, newStore)
			receipts, series := receiptSeries(t, v)
			for _, id := range []string{"r-1", "r-2"} {
				require.NoError(t, receipts.Put(ctx, id, Receipt{Total: 10}))
				_, err := series.Enqueue(ctx, id)
				require.NoError(t, err)
			}
			pending, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, err = series.RunPass(ctx)
			require.NoError(t, err)

			require.NoError(t, adv.Drop(ctx, "v/books/_numbering/receipts/assigned/r-1"))
			_, err = series.Enqueue(ctx, "r-1")
			assert.ErrorIs(t, err, numbering.ErrAlreadyNumbered, "the record says it has its number")

			// The store also brings back r-1's pending entry.
			require.NoError(t, adv.Restore(ctx, pending, "v/books/_numbering/receipts/pending/"))
			n, err := series.Pending(ctx)
			require.NoError(t, err)
			require.Equal(t, 2, n)
			rep, err := series.RunPass(ctx)
			require.NoError(t, err)
			assert.Equal(t, 0, rep.Assigned)
			assert.Equal(t, 2, rep.Skipped)
			last, err := series.Last(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), last, "no number taken")

			r, err := receipts.Get(ctx, "r-1")
			require.NoError(t, err)
			assert.Equal(t, uint64(1), r.Number, "r-1 keeps its number")
			assert.Len(t, ledgerEntries(t, v, ledger.NumberAssigned, "receipts", "r-1"), 1)
			audit, err := series.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, numbering.AuditReport{Series: "receipts", Last: 2, Assigned: 2}, audit)
		})
	}
}

// Item 9, when prevention is impossible: a store that drops the index AND
// serves the record as it was before its stamp (an authentic older
// revision) gets the record numbered again; Audit reports it.
func TestAdversaryNumberingRenumberDetected(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, v := advVault(t, newStore)
			receipts, series := receiptSeries(t, v)
			unstamped := numberOne(t, adv, receipts, series, "r-1")
			audit, err := series.Audit(ctx)
			require.NoError(t, err)
			require.Empty(t, audit.Renumbered)

			require.NoError(t, adv.Drop(ctx, "v/books/_numbering/receipts/assigned/r-1"))
			require.NoError(t, adv.Restore(ctx, unstamped, "v/books/receipts/"))
			_, err = series.Enqueue(ctx, "r-1")
			require.NoError(t, err)
			_, err = series.RunPass(ctx)
			require.NoError(t, err)

			audit, err = series.Audit(ctx)
			require.ErrorIs(t, err, numbering.ErrDuplicate)
			assert.Equal(t, []numbering.Renumbered{{RecordID: "r-1", Numbers: []uint64{1, 2}}}, audit.Renumbered)
			assert.Empty(t, audit.Reused)
			assert.Equal(t, 2, audit.Assigned)
		})
	}
}

// Item 10 (numbering): keys outside the series' prefixes give
// stores.ErrMisbehaving from Pending, Assignments and RunPass; a pass never
// deletes a key the store listed outside its own.
func TestAdversaryNumberingListOutsidePrefix(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv, v := advVault(t, newStore)
			receipts, series := numberedReceipts(t, v)
			require.NoError(t, receipts.Put(ctx, "r-3", Receipt{Total: 30}))
			_, err := series.Enqueue(ctx, "r-3")
			require.NoError(t, err)

			// Keys outside every prefix: short (the old slicing panic) and
			// long, naming a real record the sweep would have deleted.
			adv.InjectList("v/books/_numbering/",
				stores.Item{Key: "v/b", Value: []byte("x")},
				stores.Item{Key: "v/books/receipts/r-1", Value: []byte("x")})

			_, err = series.Pending(ctx)
			assert.ErrorIs(t, err, stores.ErrMisbehaving)
			var listErr error
			for _, err := range series.Assignments(ctx) {
				if err != nil {
					listErr = err
				}
			}
			assert.ErrorIs(t, listErr, stores.ErrMisbehaving)
			_, err = series.RunPass(ctx)
			assert.ErrorIs(t, err, stores.ErrMisbehaving)

			r, err := receipts.Get(ctx, "r-1")
			require.NoError(t, err, "the record the store listed is still there")
			assert.Equal(t, uint64(1), r.Number)
			last, err := series.Last(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), last)
		})
	}
}

// hookStore calls after once the first compare-and-swap on key, or the
// first transaction that writes key, succeeds.
type hookStore struct {
	stores.Store
	tr    stores.Transactor
	key   string
	after func()
}

func (h *hookStore) CompareAndSwap(ctx context.Context, key string, expected uint64, value []byte) (uint64, error) {
	v, err := h.Store.CompareAndSwap(ctx, key, expected, value)
	if err == nil && key == h.key && h.after != nil {
		f := h.after
		h.after = nil
		f()
	}
	return v, err
}

func (h *hookStore) Update(ctx context.Context, fn func(tx stores.Tx) error) error {
	var wrote bool
	err := h.tr.Update(ctx, func(tx stores.Tx) error {
		wrote = false
		return fn(keyWatch{tx, h.key, &wrote})
	})
	if err == nil && wrote && h.after != nil {
		f := h.after
		h.after = nil
		f()
	}
	return err
}

// keyWatch is a transaction that notes a Put of key.
type keyWatch struct {
	stores.Tx
	key   string
	wrote *bool
}

func (k keyWatch) Put(key string, value []byte) error {
	if key == k.key {
		*k.wrote = true
	}
	return k.Tx.Put(key, value)
}

// Item 9, the pass's last line: a record that the pass planned to number
// (the store showed it unnumbered) but that carries its number by the time
// it is stamped keeps that number; the pass voids the number it meant to
// give, with the reason, and Audit stays clean.
func TestAdversaryNumberingStampFindsNumber(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := faultstore.NewAdversary(newStore(t))
			hook := &hookStore{Store: adv.Store(), tr: adv.Store().(stores.Transactor), key: "v/books/_numbering/receipts/head"}
			v := openVault(t, openDB(t, hook, "firm", "s"), "books")
			receipts, series := receiptSeries(t, v)
			unstamped := numberOne(t, adv, receipts, series, "r-1")
			stamped, err := adv.Snapshot(ctx)
			require.NoError(t, err)

			// The store hides the number from the plan, then shows the
			// stamped record again once the batch is committed.
			require.NoError(t, adv.Drop(ctx, "v/books/_numbering/receipts/assigned/r-1"))
			require.NoError(t, adv.Restore(ctx, unstamped, "v/books/receipts/"))
			_, err = series.Enqueue(ctx, "r-1")
			require.NoError(t, err)
			hook.after = func() { require.NoError(t, adv.Restore(ctx, stamped, "v/books/receipts/")) }
			rep, err := series.RunPass(ctx)
			require.NoError(t, err)
			assert.Equal(t, numbering.PassReport{Batch: 2, First: 2, Last: 2, Voided: 1}, rep)

			r, err := receipts.Get(ctx, "r-1")
			require.NoError(t, err)
			assert.Equal(t, uint64(1), r.Number, "r-1 keeps its number")
			assert.Len(t, ledgerEntries(t, v, ledger.NumberAssigned, "receipts", "r-1"), 1)
			voids := ledgerEntries(t, v, ledger.NumberVoided, "receipts", "r-1")
			require.Len(t, voids, 1)
			assert.Equal(t, uint64(2), voids[0].Number)
			assert.Equal(t, "record already carries number 1", voids[0].Reason)
			audit, err := series.Audit(ctx)
			require.NoError(t, err)
			assert.Equal(t, numbering.AuditReport{Series: "receipts", Last: 2, Assigned: 1, Voided: 1}, audit)
		})
	}
}

// Concurrent PutNumbered calls for one id (a caller retrying while its first
// call is still in flight) give the record one number, and every call
// returns it.
func TestPutNumberedConcurrentSameID(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := advVault(t, newStore)
			invoices := vault.CollectionOf[Invoice](v, "invoices")
			seq, err := v.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			const callers = 16
			got := make([]string, callers)
			errs := make([]error, callers)
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() {
					inv, err := invoices.PutNumbered(ctx, "inv-1", seq, numberInvoice)
					got[i], errs[i] = inv.Number, err
				})
			}
			wg.Wait()
			for i := range callers {
				require.NoError(t, errs[i])
				assert.Equal(t, "1", got[i], "caller %d", i)
			}
			head, err := seq.Peek(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), head)
			assert.Len(t, ledgerEntries(t, v, ledger.RecordPut, "invoices", "inv-1"), 1)
		})
	}
}
