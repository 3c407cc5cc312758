package noydb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// Receipt-like records of the definition tests.
type Chit struct {
	No    string
	Total int
}

func setChit(s *Chit, n sequence.Serial) { s.No = n.Formatted }

// A series whose format R-{seq:05} was stored by a Sequence, then used
// through NumberingOf with no format (the stored one): Put, Get and a Put
// of the copy Get returned all show and store "R-00002", on the write-time
// path and on the pass path, in this process and in a fresh one whose
// first call is a read. (Before, Put stored "R-00002", Get showed "2" and
// a Put of that copy stored "2": the issued text was lost.)
func TestNumberingOfRendersTheStoredDefinition(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			db, v := openSession(t, st, "")
			q, err := v.Sequence("receipts", sequence.Options{Format: "R-{seq:05}"})
			require.NoError(t, err)
			_, err = q.Next(ctx) // R-00001, the format stored
			require.NoError(t, err)

			c := vault.CollectionOf[Chit](v, "slips")
			h, err := vault.NumberingOf(c, "receipts", sequence.Options{}, setChit)
			require.NoError(t, err)
			r, err := h.Put(ctx, "a", Chit{Total: 5})
			require.NoError(t, err)
			assert.Equal(t, "R-00002", r.Value.No)
			g, err := h.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, "R-00002", g.Value.No)
			assert.Equal(t, sequence.Serial{N: 2, Formatted: "R-00002"}, g.Serial)
			_, err = h.Put(ctx, "a", g.Value)
			require.NoError(t, err)
			raw, err := c.Get(ctx, "a")
			require.NoError(t, err)
			assert.Equal(t, "R-00002", raw.No, "a Put of the copy keeps the issued text")

			// The pass path renders the same way.
			require.NoError(t, c.Put(ctx, "b", Chit{Total: 6}))
			_, err = h.Series().Enqueue(ctx, "b")
			require.NoError(t, err)
			_, err = h.Settle(ctx)
			require.NoError(t, err)
			raw, err = c.Get(ctx, "b")
			require.NoError(t, err)
			assert.Equal(t, "R-00003", raw.No)
			require.NoError(t, db.Close())

			// A fresh process whose first call is a read.
			_, v2 := openSession(t, st, "")
			c2 := vault.CollectionOf[Chit](v2, "slips")
			h2, err := vault.NumberingOf(c2, "receipts", sequence.Options{}, setChit)
			require.NoError(t, err)
			for id, want := range map[string]string{"a": "R-00002", "b": "R-00003"} {
				g, err := h2.Get(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, want, g.Value.No, id)
				assert.Equal(t, want, g.Serial.Formatted, id)
			}

			// A handle asking for another format is refused, writing nothing.
			h3, err := vault.NumberingOf(c2, "receipts", sequence.Options{Format: "X-{seq}"}, setChit)
			require.NoError(t, err)
			_, err = h3.Put(ctx, "c", Chit{})
			assert.ErrorIs(t, err, numbering.ErrMismatch)
			_, err = c2.Get(ctx, "c")
			assert.ErrorIs(t, err, vault.ErrNotFound)
		})
	}
}

// NumberingOf takes the definition it can honour and refuses the rest with
// ErrInvalidArgument instead of dropping it: a correcting series (Corrects),
// and, not yet, a partition, period, fiscal start, time zone or metadata.
// A series whose stored definition has one of them (a Sequence stored it)
// is refused at its first call, with ErrDefinitionMismatch, numbering
// nothing. (Before, NumberingOf kept the format and dropped the rest: a
// credit-note series numbered with no correction, a period series without
// its period.)
func TestNumberingOfRefusesWhatItCannotHonour(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, memAndBadger()["memstore"](t), "")
	c := vault.CollectionOf[Chit](v, "slips")
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	for name, opts := range map[string]sequence.Options{
		"corrects":     {Corrects: "invoices"},
		"period":       {Period: sequence.PeriodMonth},
		"fiscal start": {FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}},
		"location":     {Location: rome},
		"meta":         {Meta: map[string]string{"code": "A1"}},
		"partition":    {Partition: []any{2026}},
	} {
		_, err := vault.NumberingOf(c, "credit-notes", opts, setChit)
		assert.ErrorIs(t, err, vault.ErrInvalidArgument, name)
		if name == "meta" || name == "partition" {
			// The refusal says why, and what numbers such a series.
			assert.ErrorContains(t, err, "PutNumbered", name)
		}
	}
	_, err = vault.NumberingOf(c, "receipts", sequence.Options{Location: time.UTC}, setChit)
	require.NoError(t, err, "UTC is the default zone")

	// A period stored with the series by a Sequence.
	q, err := v.Sequence("monthly", sequence.Options{Period: sequence.PeriodMonth})
	require.NoError(t, err)
	_, err = q.NextAt(ctx, time.Date(2026, time.March, 3, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	h, err := vault.NumberingOf(c, "monthly", sequence.Options{}, setChit)
	require.NoError(t, err)
	_, err = h.Put(ctx, "m", Chit{})
	assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
	_, err = c.Get(ctx, "m")
	assert.ErrorIs(t, err, vault.ErrNotFound, "nothing written")
	require.NoError(t, c.Put(ctx, "n", Chit{}))
	_, err = h.Series().Enqueue(ctx, "n")
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
	got, err := h.Get(ctx, "n")
	require.NoError(t, err)
	assert.Zero(t, got.Serial.N, "n got no number")
}
