package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// Customer is a record of the customers collection in the limits tests.
type Customer struct {
	Name string
	No   string
}

// TestLimitedPersonNumbersOnlyBoundSeries: wanda, a writer limited to
// customers, takes, voids, seeds and closes no number of a series no owner
// bound to customers (the owner's invoices, or a new series she would
// capture by numbering first): each call is ErrNotPermitted and the store
// is left byte for byte as it was. Once olga binds a series to customers
// (BindSeries), or numbers a customer record with a series herself,
// wanda numbers it; neither wanda nor a reader binds. The ledger verifies.
func TestLimitedPersonNumbersOnlyBoundSeries(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"))
			require.NoError(t, olga.Grant(ctx, "rita", vault.Secret([]byte("r")), vault.RoleReader))
			invoices, err := olga.Sequence("invoices", sequence.Options{})
			require.NoError(t, err)
			n, err := invoices.Next(ctx)
			require.NoError(t, err)
			require.Equal(t, uint64(1), n)
			monthly, err := olga.Sequence("monthly", sequence.Options{Period: sequence.PeriodMonth})
			require.NoError(t, err)
			_, err = monthly.NextAt(ctx, time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
			require.NoError(t, err)

			wanda := openPerson(t, personCfg(st, "wanda", "w"))
			seq := func(series string) *sequence.Sequence {
				q, err := wanda.Sequence(series, sequence.Options{})
				require.NoError(t, err)
				return q
			}
			before := snapshot(t, st)
			refused := map[string]func() error{
				"next of the owner's series": func() error { _, err := seq("invoices").Next(ctx); return err },
				"next of several":            func() error { _, err := seq("invoices").NextN(ctx, 3); return err },
				"claim":                      func() error { _, err := seq("invoices").Claim(ctx, "req-1"); return err },
				"void":                       func() error { return seq("invoices").Void(ctx, 1, "typo") },
				"seed":                       func() error { return seq("invoices").SeedTo(ctx, 10) },
				"close a period":             func() error { return seq("monthly").ClosePeriod(ctx, "2026-01") },
				"a new series, numbering first": func() error {
					_, err := seq("customer-no").Next(ctx)
					return err
				},
				"binding": func() error { return wanda.BindSeries(ctx, "customers", "invoices") },
				"a reader's bind": func() error {
					return openPerson(t, personCfg(st, "rita", "r")).BindSeries(ctx, "customers", "invoices")
				},
			}
			for what, call := range refused {
				assert.ErrorIs(t, call(), vault.ErrNotPermitted, what)
			}
			sameStore(t, before, snapshot(t, st), "a refused call takes nothing")
			// A numbered record, numbering first: no number, no record, no
			// ledger entry (the numbering handle's settings may be stored).
			head, err := olga.Audit().Head(ctx)
			require.NoError(t, err)
			nb, err := vault.NumberingOf(vault.CollectionOf[Customer](wanda, "customers"), "customer-no", sequence.Options{},
				func(c *Customer, s sequence.Serial) { c.No = s.Formatted })
			require.NoError(t, err)
			_, err = nb.Put(ctx, "c-1", Customer{Name: "Ada"})
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			_, err = vault.CollectionOf[Customer](olga, "customers").Get(ctx, "c-1")
			assert.ErrorIs(t, err, vault.ErrNotFound)
			after, err := olga.Audit().Head(ctx)
			require.NoError(t, err)
			assert.Equal(t, head.Seq, after.Seq, "no ledger entry")
			verified(t, olga)

			// Bound by the owner: wanda numbers it, and voids its numbers.
			require.NoError(t, olga.BindSeries(ctx, "customers", "customer-no"))
			require.NoError(t, olga.BindSeries(ctx, "customers", "customer-no"), "binding again writes nothing")
			n, err = seq("customer-no").Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), n)
			require.NoError(t, seq("customer-no").Void(ctx, 1, "test"))
			rec, err := nb.Put(ctx, "c-1", Customer{Name: "Ada"})
			require.NoError(t, err)
			assert.Equal(t, "2", rec.Value.No)

			// Bound by the owner's own first numbered record there.
			_, err = seq("vip-no").Next(ctx)
			require.ErrorIs(t, err, vault.ErrNotPermitted)
			onb, err := vault.NumberingOf(vault.CollectionOf[Customer](olga, "customers"), "vip-no", sequence.Options{},
				func(c *Customer, s sequence.Serial) { c.No = s.Formatted })
			require.NoError(t, err)
			_, err = onb.Put(ctx, "c-vip", Customer{Name: "Grace"})
			require.NoError(t, err)
			n, err = seq("vip-no").Next(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(2), n)

			// The owner's series stay out of reach.
			_, err = seq("invoices").Next(ctx)
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			verified(t, olga)
		})
	}
}

// TestNarrowedHandleNumbersOnlyBoundSeries: wanda's handle, opened while
// she could use every collection, takes no number of the owner's series
// once olga has limited her to customers: the commit reads her keyring
// entry as it stands, not as the handle opened with it.
func TestNarrowedHandleNumbersOnlyBoundSeries(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(ctx, "wanda", vault.Secret([]byte("w")), vault.RoleWriter))
			wanda := openPerson(t, personCfg(st, "wanda", "w"))
			q, err := wanda.Sequence("invoices", sequence.Options{})
			require.NoError(t, err)
			_, err = q.Next(ctx)
			require.NoError(t, err, "given every collection, any series")

			require.NoError(t, olga.SetCollections(ctx, "wanda", "customers"))
			before := snapshot(t, st)
			_, err = q.Next(ctx)
			assert.ErrorIs(t, err, vault.ErrNotPermitted)
			sameStore(t, before, snapshot(t, st), "a refused call takes nothing")
			verified(t, olga)
		})
	}
}

// sameStore asserts that two snapshots of a store hold the same keys and
// values, naming the keys that differ (not the values: sealed bytes).
func sameStore(t testing.TB, before, after map[string]string, msg string) {
	t.Helper()
	var changed []string
	for k, v := range after {
		if b, ok := before[k]; !ok || b != v {
			changed = append(changed, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			changed = append(changed, k+" (deleted)")
		}
	}
	assert.Empty(t, changed, msg)
}
