package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// Dated is a customer record numbered by its own date, per month.
type Dated struct {
	No   string
	Date time.Time
}

// datedHandle is p's handle of the series, over customers, numbered per
// month by the record's date.
func datedHandle(t testing.TB, p *vault.Vault, series string) *vault.Numbered[Dated] {
	t.Helper()
	h, err := vault.NumberingOfDated(vault.CollectionOf[Dated](p, "customers"), series,
		sequence.Options{Period: sequence.PeriodMonth, Format: "C{YYYY}{MM}-{seq:03}"},
		func(d *Dated, s sequence.Serial) { d.No = s.Formatted }, func(d *Dated) time.Time { return d.Date })
	require.NoError(t, err)
	return h
}

// Limits cover the numbers of periods too: wanda, a writer limited to
// customers, takes no number of a period of a series no owner bound to
// customers, at write time or by a pass of a period (on a device of a
// hub, where passes number), and closes none of its periods: each is
// ErrNotPermitted, nothing numbered, and the ledger verifies. Once olga
// binds the series, she does all of it.
func TestLimitedPersonNumbersAndClosesPeriodsOnlyOfBoundSeries(t *testing.T) {
	jan := time.Date(2026, time.January, 5, 12, 0, 0, 0, time.UTC)
	check := func(t *testing.T, olga, wanda *vault.Vault, sync func()) {
		ctx := context.Background()
		h := datedHandle(t, wanda, "cust-m")
		q, err := wanda.Sequence("cust-m", sequence.Options{Period: sequence.PeriodMonth, Format: "C{YYYY}{MM}-{seq:03}"})
		require.NoError(t, err)
		number := func() error {
			if h.Online() {
				_, err := h.Put(ctx, "c-1", Dated{Date: jan})
				return err
			}
			_, err := h.Settle(ctx)
			return err
		}
		if !h.Online() {
			r, err := h.Put(ctx, "c-1", Dated{Date: jan})
			require.NoError(t, err, "a handoff takes no number")
			require.True(t, r.Pending)
			sync()
		}
		require.ErrorIs(t, number(), vault.ErrNotPermitted, "a number of a period of a series no owner bound")
		require.ErrorIs(t, q.ClosePeriod(ctx, "2026-01"), vault.ErrNotPermitted, "a close of it")
		if g, err := h.Get(ctx, "c-1"); err == nil {
			assert.Zero(t, g.Serial.N, "nothing numbered")
		}
		verified(t, olga)

		require.NoError(t, olga.BindSeries(ctx, "customers", "cust-m"))
		require.NoError(t, number())
		sync()
		g, err := h.Get(ctx, "c-1")
		require.NoError(t, err)
		assert.Equal(t, "C202601-001", g.Value.No)
		require.NoError(t, q.ClosePeriod(ctx, "2026-01"), "bound: she closes its period")
		sync()
		verified(t, olga)
		verified(t, wanda)
	}
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			olga := openPerson(t, personCfg(st, "olga", "o"))
			require.NoError(t, olga.Grant(context.Background(), "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"))
			check(t, olga, openPerson(t, personCfg(st, "wanda", "w")), func() {})
		})
	}
	for name, newHub := range txStores() {
		t.Run("device of a hub on "+name, func(t *testing.T) {
			hub, devA, devB := newHub(t), memstore.New(), memstore.New()
			olga := openPerson(t, hubPerson(devA, hub, "olga", "o"))
			require.NoError(t, vault.CollectionOf[Dated](olga, "customers").Put(context.Background(), "c-0", Dated{Date: jan}))
			require.NoError(t, olga.Grant(context.Background(), "wanda", vault.Secret([]byte("w")), vault.RoleWriter, "customers"))
			mustSync(t, olga)
			wanda := openPerson(t, hubPerson(devB, hub, "wanda", "w"))
			mustSync(t, wanda)
			check(t, olga, wanda, func() { mustSync(t, wanda); mustSync(t, olga) })
		})
	}
}
