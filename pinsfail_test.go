package noydb_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Two DBs of one process on one store and one StateDir (their pins are
// shared): numbers the other DB took are not a rollback, whether the
// counter is written by compare-and-swap (a store without transactions)
// or in transactions.
func TestSharedStateDirIsNotRollback(t *testing.T) {
	ctx := context.Background()
	for name, hide := range map[string]bool{"cas": true, "tx": false} {
		t.Run(name, func(t *testing.T) {
			st := faultstore.New(memstore.New(), faultstore.Options{HideTransactor: hide})
			dir := t.TempDir()
			var seqs []*sequence.Sequence
			for range 2 {
				seq, err := openVault(t, openWithState(t, st, dir), "books").Sequence("inv", sequence.Options{})
				require.NoError(t, err)
				seqs = append(seqs, seq)
			}
			const rounds = 25
			var got []uint64
			errs := 0
			for range rounds {
				for _, q := range seqs {
					n, err := q.Next(ctx)
					if err != nil {
						errs++
						t.Log(err)
						continue
					}
					got = append(got, n)
				}
			}
			assert.Zero(t, errs)
			want := make([]uint64, 2*rounds)
			for i := range want {
				want[i] = uint64(i + 1)
			}
			assert.Equal(t, want, got)
		})
	}
}

// The state folder removed while the vault is open (as a disk that fails or
// fills up): the very call whose pin could not be written fails with
// ErrPinsNotSaved (with the number it took), and so does every call after.
func TestUnsavedPinFailsTheCall(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T) (*vault.Vault, string) {
		dir := t.TempDir()
		v := openVault(t, openWithState(t, memstore.New(), dir), "books")
		return v, dir
	}
	t.Run("next", func(t *testing.T) {
		v, dir := open(t)
		q, err := v.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		n, err := q.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(1), n)
		require.NoError(t, os.RemoveAll(dir))
		n, err = q.Next(ctx)
		assert.ErrorIs(t, err, noydb.ErrPinsNotSaved)
		assert.ErrorIs(t, err, vault.ErrPinsNotSaved)
		assert.Equal(t, uint64(2), n, "the number taken comes with the error")
		n, err = q.Next(ctx)
		assert.ErrorIs(t, err, noydb.ErrPinsNotSaved, "sticky")
		assert.Zero(t, n, "nothing more is issued")
	})
	t.Run("void", func(t *testing.T) {
		v, dir := open(t)
		q, err := v.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		_, err = q.Next(ctx)
		require.NoError(t, err)
		require.NoError(t, os.RemoveAll(dir))
		assert.ErrorIs(t, q.Void(ctx, 1, "cancelled"), noydb.ErrPinsNotSaved)
	})
	t.Run("claim", func(t *testing.T) {
		v, dir := open(t)
		q, err := v.Sequence("inv", sequence.Options{})
		require.NoError(t, err)
		require.NoError(t, os.RemoveAll(dir))
		n, err := q.Claim(ctx, sequence.NewRequestID())
		assert.ErrorIs(t, err, noydb.ErrPinsNotSaved)
		assert.Equal(t, uint64(1), n)
	})
	t.Run("put", func(t *testing.T) {
		v, dir := open(t)
		invoices := vault.CollectionOf[Invoice](v, "invoices")
		require.NoError(t, invoices.Put(ctx, "inv-1", Invoice{Total: 1}))
		require.NoError(t, os.RemoveAll(dir))
		assert.ErrorIs(t, invoices.Put(ctx, "inv-2", Invoice{Total: 2}), noydb.ErrPinsNotSaved)
		assert.ErrorIs(t, invoices.Put(ctx, "inv-3", Invoice{Total: 3}), noydb.ErrPinsNotSaved)
	})
	t.Run("ledger", func(t *testing.T) {
		v, dir := open(t)
		require.NoError(t, os.RemoveAll(dir))
		h, err := v.Record(ctx, "note", []byte("x"))
		assert.ErrorIs(t, err, noydb.ErrPinsNotSaved)
		assert.NotZero(t, h.Seq, "the committed head comes with the error")
	})
	t.Run("numbering", func(t *testing.T) {
		v, dir := open(t)
		tickets := vault.CollectionOf[Ticket](v, "tickets")
		require.NoError(t, tickets.Put(ctx, "t-1", Ticket{Subject: "a"}))
		ns := ticketNumbering(t, v)
		_, err := ns.Enqueue(ctx, "t-1")
		require.NoError(t, err)
		require.NoError(t, os.RemoveAll(dir))
		_, err = ns.RunPass(ctx)
		assert.ErrorIs(t, err, noydb.ErrPinsNotSaved)
	})
}

// A store that rolls the counter and the ledger back but keeps the claim
// record written since: the claim is refused as a rollback, not answered
// with a number the counter would then hand out again.
func TestKeptClaimRecordAboveCounterIsRollback(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			_, v := openSession(t, adv.Store(), "")
			q := mustSeq(t, v, "inv")
			for range 2 {
				_, err := q.Next(ctx)
				require.NoError(t, err)
			}
			snap, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			id := sequence.NewRequestID()
			n, err := q.Claim(ctx, id)
			require.NoError(t, err)
			require.Equal(t, uint64(3), n)
			const counter = "v/books/_sequences/inv"
			require.Contains(t, snap, counter)
			require.NoError(t, adv.Set(ctx, counter, snap[counter]))
			require.NoError(t, adv.Restore(ctx, snap, "v/books/_ledger/"))

			// A restart without pins: only the claim record is left to tell.
			_, v = openSession(t, adv.Store(), "")
			q = mustSeq(t, v, "inv")
			n, err = q.Claim(ctx, id)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.Zero(t, n)
		})
	}
}
