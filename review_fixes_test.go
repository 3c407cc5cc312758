package noydb_test

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// A call in flight on a vault that asks the DB for that vault while the
// vault's Close waits for the call gets a fresh handle instead of waiting
// for the Close (which waits for it).
func TestOpenVaultFromACallWhileItsVaultCloses(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, memstore.New(), "firm", "s")
	v := openVault(t, db, "books")
	notes := vault.CollectionOf[string](v, "notes")
	require.NoError(t, notes.Put(ctx, "n1", "x"))

	var opened *vault.Vault
	callErr, closeErr := closeDuring(v, v.Close, func(hold func()) error {
		for _, err := range notes.List(ctx) { // in flight for the whole range
			if err != nil {
				return err
			}
			hold()
			opened, err = db.OpenVault(ctx, "books")
			return err
		}
		return nil
	})
	require.NoError(t, callErr)
	require.NoError(t, closeErr)
	require.NotNil(t, opened)
	require.NotSame(t, v, opened)
	got, err := vault.CollectionOf[string](opened, "notes").Get(ctx, "n1")
	require.NoError(t, err)
	assert.Equal(t, "x", got)
	require.NoError(t, db.ForgetVault(ctx, "unused"), "the DB is still usable")
}

// ForgetVault refuses, instead of waiting, while a vault of that name is
// still closing; once its Close returned it forgets.
func TestForgetVaultWhileItsVaultCloses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openWithState(t, memstore.New(), dir)
	v := openVault(t, db, "books")
	notes := vault.CollectionOf[string](v, "notes")
	require.NoError(t, notes.Put(ctx, "n1", "x"))

	err, closeErr := closeDuring(v, v.Close, func(hold func()) error {
		for _, err := range notes.List(ctx) {
			if err != nil {
				return err
			}
			hold()
			return db.ForgetVault(ctx, "books")
		}
		return nil
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "still closing")
	require.NoError(t, closeErr)
	require.NoError(t, db.ForgetVault(ctx, "books"))
}

// A PutNumbered that committed although its pin could not be saved returns
// the record it wrote, with an error matching ErrUnpinned; the calls after it,
// which write nothing, match ErrPinsNotSaved but not ErrUnpinned.
func TestPutNumberedUnpinnedReturnsTheRecord(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := memstore.New()
	v := openVault(t, openWithState(t, st, dir), "books")
	seq, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	invoices := vault.CollectionOf[Invoice](v, "invoices")
	build := func(total int) func(sequence.Serial) (Invoice, error) {
		return func(s sequence.Serial) (Invoice, error) { return Invoice{Number: s.Formatted, Total: total}, nil }
	}
	_, err = invoices.PutNumbered(ctx, "inv-1", seq, build(1))
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(dir))

	got, err := invoices.PutNumbered(ctx, "inv-2", seq, build(2))
	require.ErrorIs(t, err, noydb.ErrPinsNotSaved)
	require.ErrorIs(t, err, noydb.ErrUnpinned)
	assert.Equal(t, Invoice{Number: "2", Total: 2}, got)

	before := snapshot(t, st)
	got, err = invoices.PutNumbered(ctx, "inv-3", seq, build(3))
	require.ErrorIs(t, err, noydb.ErrPinsNotSaved)
	assert.NotErrorIs(t, err, noydb.ErrUnpinned, "nothing was written")
	assert.Equal(t, Invoice{}, got)
	assert.Equal(t, before, snapshot(t, st))

	_, err = seq.Next(ctx)
	assert.NotErrorIs(t, err, noydb.ErrUnpinned)
	assert.ErrorIs(t, err, noydb.ErrPinsNotSaved)
}

// Void on a store without transactions is admitted like the allocating
// calls: Close waits for its marker's write, so nothing lands after Close
// returned.
func TestCloseWaitsForVoid(t *testing.T) {
	ctx := context.Background()
	raw := memstore.New()
	hs := newHoldStore(raw, "/_sequences/inv\x01") // the void marker sits under the counter's key
	db := openDB(t, hs, "firm", "s")
	v := openVault(t, db, "books")
	q, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	hs.armed.Store(true)
	voided := make(chan error, 1)
	go func() { voided <- q.Void(ctx, 1, "cancelled") }()
	<-hs.reached
	closed := make(chan error, 1)
	go func() { closed <- v.Close() }()
	for !v.Closed() {
		runtime.Gosched()
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a Void was writing")
	default:
	}
	close(hs.release)
	require.NoError(t, <-voided, "the Void admitted before Close completes with its ledger entry")
	require.NoError(t, <-closed)
	atClose := snapshot(t, raw)
	assert.ErrorIs(t, q.Void(ctx, 1, "again"), stores.ErrClosed)
	assert.Equal(t, atClose, snapshot(t, raw))
}
