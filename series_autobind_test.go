package noydb_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// TestOwnersFirstNumberedRecordBindsItsSeries: an owner's first numbered
// record in a collection binds its series there, in the record's own
// commit, on every write-time path (NumberingOf, PutNumbered, and
// PutNumbered in an Update): a person limited to that collection then
// numbers the series, and a fresh handle of theirs too (the binding is
// stored, not remembered). A series the owner numbers in another
// collection stays out of their reach. The binding adds no ledger entry
// (Verify replays it from the record's own entry), and a numbered record
// refused for its arguments binds nothing.
func TestOwnersFirstNumberedRecordBindsItsSeries(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"))
			wanda := openPerson(t, personCfg(st, "wanda", "w"))
			next := func(w *vault.Vault, series string) error {
				q, err := w.Sequence(series, sequence.Options{})
				require.NoError(t, err)
				_, err = q.Next(ctx)
				return err
			}
			for _, s := range []string{"cust-no", "acct-no", "ref-no", "sale-no"} {
				require.ErrorIs(t, next(wanda, s), vault.ErrNotPermitted, s)
			}
			customers := vault.CollectionOf[Customer](olga, "customers")
			seqOf := func(series string) *sequence.Sequence {
				q, err := olga.Sequence(series, sequence.Options{})
				require.NoError(t, err)
				return q
			}
			build := func(s sequence.Serial) (Customer, error) { return Customer{No: s.Formatted}, nil }

			// Refused for its arguments: nothing written.
			before := snapshot(t, st)
			_, err := customers.PutNumbered(ctx, "c-0", seqOf("acct-no"), nil)
			require.ErrorIs(t, err, vault.ErrInvalidArgument)
			sameStore(t, before, snapshot(t, st), "a refused numbered record binds nothing")

			head := func() uint64 {
				h, err := olga.Audit().Head(ctx)
				require.NoError(t, err)
				return h.Seq
			}
			// NumberingOf at write time: the first record binds, and writes
			// as many ledger entries as the second.
			nb, err := vault.NumberingOf(customers, "cust-no", sequence.Options{},
				func(c *Customer, s sequence.Serial) { c.No = s.Formatted })
			require.NoError(t, err)
			h0 := head()
			_, err = nb.Put(ctx, "c-1", Customer{Name: "Ada"})
			require.NoError(t, err)
			h1 := head()
			_, err = nb.Put(ctx, "c-2", Customer{Name: "Bea"})
			require.NoError(t, err)
			assert.Equal(t, h1-h0, head()-h1, "the binding adds no ledger entry")

			// PutNumbered, and PutNumbered in an Update.
			_, err = customers.PutNumbered(ctx, "c-3", seqOf("acct-no"), build)
			require.NoError(t, err)
			require.NoError(t, olga.Update(ctx, func(tx *vault.Tx) error {
				_, err := customers.In(tx).PutNumbered("c-4", seqOf("ref-no"), build)
				return err
			}))
			// Another collection binds there only.
			_, err = vault.CollectionOf[Customer](olga, "sales").PutNumbered(ctx, "s-1", seqOf("sale-no"), build)
			require.NoError(t, err)

			fresh := openPerson(t, personCfg(st, "wanda", "w"))
			for _, w := range []*vault.Vault{wanda, fresh} {
				for _, s := range []string{"cust-no", "acct-no", "ref-no"} {
					assert.NoError(t, next(w, s), s)
				}
				assert.ErrorIs(t, next(w, "sale-no"), vault.ErrNotPermitted, "bound to sales only")
			}
			for e, err := range olga.Audit().Read(ctx, 1) {
				require.NoError(t, err)
				assert.NotEqual(t, ledger.SeriesBound, e.Kind, "entry %d", e.Seq)
			}
			verified(t, olga)
		})
	}
}

// TestLimitedPersonsNumberedRecordBindsNothing: a numbered record of a
// person limited to some collections binds nothing, nor does a writer's
// given every collection: only an owner's does.
func TestLimitedPersonsNumberedRecordBindsNothing(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	olga := openPerson(t, personCfg(st, "olga", "o"))
	require.NoError(t, olga.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"))
	require.NoError(t, olga.Grant(ctx, "will", vault.Secret([]byte("x")), vault.RoleWriter))
	will := openPerson(t, personCfg(st, "will", "x"))
	wanda := openPerson(t, personCfg(st, "wanda", "w"))
	q, err := will.Sequence("cust-no", sequence.Options{})
	require.NoError(t, err)
	_, err = vault.CollectionOf[Customer](will, "customers").PutNumbered(ctx, "c-1", q,
		func(s sequence.Serial) (Customer, error) { return Customer{No: s.Formatted}, nil })
	require.NoError(t, err)
	wq, err := wanda.Sequence("cust-no", sequence.Options{})
	require.NoError(t, err)
	_, err = wq.Next(ctx)
	assert.ErrorIs(t, err, vault.ErrNotPermitted)
	verified(t, olga)
}

// TestOwnersPassBindsItsSeries: on a device of a hub, an owner's records
// handed off to a NumberingOf series of a collection are numbered by her
// pass on the hub, which binds the series to the collection there: a
// person limited to that collection then numbers it from their device.
// Every ledger verifies.
func TestOwnersPassBindsItsSeries(t *testing.T) {
	ctx := context.Background()
	hub, devA, devB := memstore.New(), memstore.New(), memstore.New()
	a := openPerson(t, hubPerson(devA, hub, "olga", "o"))
	require.NoError(t, a.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"))
	mustSync(t, a)
	b := openPerson(t, hubPerson(devB, hub, "wanda", "w"))
	mustSync(t, b)
	bq, err := b.Sequence("cust-no", sequence.Options{})
	require.NoError(t, err)
	_, err = bq.Next(ctx)
	require.ErrorIs(t, err, vault.ErrNotPermitted)

	nb, err := vault.NumberingOf(vault.CollectionOf[Customer](a, "customers"), "cust-no", sequence.Options{},
		func(c *Customer, s sequence.Serial) { c.No = s.Formatted })
	require.NoError(t, err)
	rec, err := nb.Put(ctx, "c-1", Customer{Name: "Ada"})
	require.NoError(t, err)
	require.True(t, rec.Pending)
	mustSync(t, a)
	rep, err := nb.Settle(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Assigned)

	n, err := bq.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), n)
	mustSync(t, a)
	mustSync(t, b)
	verified(t, a)
	verified(t, b)
	verified(t, openPerson(t, personCfg(hub, "olga", "o")))
}

// TestOwnersFirstNumberedRecordLocksInKeyOrder: the commit of an owner's
// first numbered record in a collection, which writes the collection's
// definition with the record, locks the definition with its other keys,
// in key order, on every write-time path (see lockOrderStore).
func TestOwnersFirstNumberedRecordLocksInKeyOrder(t *testing.T) {
	ctx := context.Background()
	st := &lockOrderStore{Store: memstore.New()}
	v := openPerson(t, personCfg(st, "olga", "o"))
	customers := vault.CollectionOf[Customer](v, "customers")
	build := func(s sequence.Serial) (Customer, error) { return Customer{No: s.Formatted}, nil }
	seqOf := func(series string) *sequence.Sequence {
		q, err := v.Sequence(series, sequence.Options{})
		require.NoError(t, err)
		return q
	}
	require.NoError(t, customers.Put(ctx, "plain", Customer{}))
	st.outOfOrder()
	nb, err := vault.NumberingOf(customers, "cust-no", sequence.Options{}, func(c *Customer, s sequence.Serial) { c.No = s.Formatted })
	require.NoError(t, err)
	_, err = nb.Put(ctx, "c-1", Customer{})
	require.NoError(t, err)
	assert.Empty(t, st.outOfOrder(), "NumberingOf")
	_, err = customers.PutNumbered(ctx, "c-2", seqOf("acct-no"), build)
	require.NoError(t, err)
	assert.Empty(t, st.outOfOrder(), "PutNumbered")
	require.NoError(t, v.Update(ctx, func(tx *vault.Tx) error {
		_, err := customers.In(tx).PutNumbered("c-3", seqOf("ref-no"), build)
		return err
	}))
	assert.Empty(t, st.outOfOrder(), "PutNumbered in an Update")
}

// TestUpdateNumberedRecordLocksTheCounterInKeyOrder: PutNumbered in a
// vault.Update reads its record before it takes the number: the counter,
// which sorts below the record, is locked with the others, in key order,
// not after the record (see lockOrderStore). PostgreSQL would otherwise
// deadlock such an Update against a plain Next of the series, which locks
// the counter first.
func TestUpdateNumberedRecordLocksTheCounterInKeyOrder(t *testing.T) {
	ctx := context.Background()
	st := &lockOrderStore{Store: memstore.New()}
	v := openPerson(t, personCfg(st, "olga", "o"))
	customers := vault.CollectionOf[Customer](v, "customers")
	require.NoError(t, v.BindSeries(ctx, "customers", "ref-no"))
	q, err := v.Sequence("ref-no", sequence.Options{})
	require.NoError(t, err)
	_, err = q.Next(ctx)
	require.NoError(t, err)
	st.outOfOrder()
	for _, id := range []string{"c-1", "c-2"} {
		require.NoError(t, v.Update(ctx, func(tx *vault.Tx) error {
			_, err := customers.In(tx).PutNumbered(id, q, func(s sequence.Serial) (Customer, error) {
				return Customer{No: s.Formatted}, nil
			})
			return err
		}))
		assert.Empty(t, st.outOfOrder(), id)
	}
	verified(t, v)
}
