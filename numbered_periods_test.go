package noydb_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file check NumberingOfDated: a series numbered by the
// date each record carries, in the period of that date.

// Till is a receipt that carries its own document date.
type Till struct {
	No     string
	Date   time.Time
	Amount int
}

func setTill(r *Till, s sequence.Serial) { r.No = s.Formatted }
func tillDate(r *Till) time.Time         { return r.Date }

// monthly opens the handle on the "tills" series of v, counted per month
// in Rome's zone.
func monthly(t testing.TB, v *vault.Vault, rome *time.Location) *vault.Numbered[Till] {
	t.Helper()
	h, err := vault.NumberingOfDated(vault.CollectionOf[Till](v, "tills"), "tills",
		sequence.Options{Period: sequence.PeriodMonth, Location: rome, Format: "T{YYYY}{MM}-{seq:03}"}, setTill, tillDate)
	require.NoError(t, err)
	return h
}

// ledgerHead is the position of v's ledger head.
func ledgerHead(t testing.TB, v *vault.Vault) uint64 {
	t.Helper()
	h, err := v.Audit().Head(context.Background())
	require.NoError(t, err)
	return h.Seq
}

func rome(t testing.TB) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	return loc
}

// A receipt dated 31 December, put after January has numbers, takes
// December's next number: the period is the record's date's, read in the
// series' zone, not the clock's. Get shows the same text, Serial.Period
// names the period, and the ledger records the number under it; a
// Sequence.At of December and the handle take from one counter. (Before,
// NumberingOf refused a period with ErrInvalidArgument.)
func TestNumberingOfDatedNumbersInThePeriodOfTheRecordsDate(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			require.True(t, h.Online())

			dec := time.Date(2026, time.December, 31, 23, 30, 0, 0, loc) // 22:30 UTC
			jan := time.Date(2027, time.January, 1, 0, 30, 0, 0, loc)    // still 31 December in UTC
			r, err := h.Put(ctx, "a", Till{Date: dec, Amount: 10})
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "T202612-001", Period: "2026-12"}, r.Serial)
			r, err = h.Put(ctx, "b", Till{Date: jan, Amount: 11})
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 1, Formatted: "T202701-001", Period: "2027-01"}, r.Serial, "Rome's January")
			r, err = h.Put(ctx, "c", Till{Date: dec.Add(-time.Hour), Amount: 12})
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 2, Formatted: "T202612-002", Period: "2026-12"}, r.Serial, "December's next")

			// One counter per period for both doors.
			q, err := v.Sequence("tills", sequence.Options{})
			require.NoError(t, err)
			s, err := q.NextSerialAt(ctx, dec)
			require.NoError(t, err)
			assert.Equal(t, sequence.Serial{N: 3, Formatted: "T202612-003", Period: "2026-12"}, s)
			r, err = h.Put(ctx, "d", Till{Date: dec, Amount: 13})
			require.NoError(t, err)
			assert.Equal(t, "T202612-004", r.Value.No)

			for id, want := range map[string]sequence.Serial{
				"a": {N: 1, Formatted: "T202612-001", Period: "2026-12"},
				"b": {N: 1, Formatted: "T202701-001", Period: "2027-01"},
				"c": {N: 2, Formatted: "T202612-002", Period: "2026-12"},
				"d": {N: 4, Formatted: "T202612-004", Period: "2026-12"},
			} {
				g, err := h.Get(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, want, g.Serial, id)
				assert.Equal(t, want.Formatted, g.Value.No, id)
			}
			var recorded []string
			for _, e := range entriesOfKind(t, v, ledger.RecordPut) {
				if e.Series == "tills" {
					recorded = append(recorded, fmt.Sprintf("%s %v %d", e.ID, e.Partition, e.Number))
				}
			}
			assert.Equal(t, []string{"a [2026-12] 1", "b [2027-01] 1", "c [2026-12] 2", "d [2026-12] 4"}, recorded)

			// A Put of a numbered record keeps its number; moving it to
			// another period is refused, nothing written.
			g, err := h.Get(ctx, "c")
			require.NoError(t, err)
			g.Value.Amount = 99
			r, err = h.Put(ctx, "c", g.Value)
			require.NoError(t, err)
			assert.Equal(t, "T202612-002", r.Value.No)
			g.Value.Date = jan
			_, err = h.Put(ctx, "c", g.Value)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument)
			got, err := h.Get(ctx, "c")
			require.NoError(t, err)
			assert.Equal(t, 99, got.Value.Amount)
			assert.True(t, got.Value.Date.Equal(dec.Add(-time.Hour)), "the date stays")
			assert.Equal(t, "T202612-002", got.Value.No)
		})
	}
}

// Writers of one period through the handle and through Sequence.NextAt at
// once: the period's numbers are exactly 1..N, whichever door took them.
func TestNumberingOfDatedSharesThePeriodCounterWithTheSequence(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			q, err := v.Sequence("tills", sequence.Options{Period: sequence.PeriodMonth, Location: loc, Format: "T{YYYY}{MM}-{seq:03}"})
			require.NoError(t, err)
			dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
			const writers = 48
			var (
				wg  sync.WaitGroup
				mu  sync.Mutex
				got []uint64
			)
			for i := range writers {
				wg.Go(func() {
					var n uint64
					if i%2 == 0 {
						r, err := h.Put(ctx, fmt.Sprintf("r%02d", i), Till{Date: dec, Amount: i})
						if !assert.NoError(t, err) {
							return
						}
						assert.Equal(t, "2026-12", r.Serial.Period)
						n = r.Serial.N
					} else {
						s, err := q.NextSerialAt(ctx, dec)
						if !assert.NoError(t, err) {
							return
						}
						n = s.N
					}
					mu.Lock()
					got = append(got, n)
					mu.Unlock()
				})
			}
			wg.Wait()
			exactlyOneToN(t, got, writers)
			head, closed, err := q.PeekPeriod(ctx, "2026-12")
			require.NoError(t, err)
			assert.Equal(t, uint64(writers), head)
			assert.False(t, closed)
		})
	}
}

// Bad input is refused with ErrInvalidArgument and writes nothing: a
// record with a zero date, a nil date function, a period asked of
// NumberingOf (which has no date to number by).
func TestNumberingOfDatedRefusesBadInputWritingNothing(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			c := vault.CollectionOf[Till](v, "tills")
			opts := sequence.Options{Period: sequence.PeriodMonth}
			_, err := vault.NumberingOfDated(c, "tills", opts, setTill, nil)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "nil date function")
			_, err = vault.NumberingOf(c, "tills", opts, setTill)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "a period without the record's date")
			_, err = vault.NumberingOfDated(c, "tills", sequence.Options{Period: sequence.Period(99)}, setTill, tillDate)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "an undeclared period")
			_, err = vault.NumberingOfDated(c, "tills", sequence.Options{Corrects: "invoices"}, setTill, tillDate)
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "a correcting series")

			h, err := vault.NumberingOfDated(c, "tills", opts, setTill, tillDate)
			require.NoError(t, err)
			head := ledgerHead(t, v)
			_, err = h.Put(ctx, "z", Till{Amount: 1})
			assert.ErrorIs(t, err, vault.ErrInvalidArgument, "a zero date")
			_, err = c.Get(ctx, "z")
			assert.ErrorIs(t, err, vault.ErrNotFound, "nothing written")
			assert.Equal(t, head, ledgerHead(t, v), "nothing recorded")
			q, err := v.Sequence("tills", sequence.Options{})
			require.NoError(t, err)
			n, _, err := q.PeekPeriod(ctx, time.Now().UTC().Format("2006-01"))
			if err == nil {
				assert.Zero(t, n, "no number taken")
			}

		})
	}
}

// A closed period takes no number: a Put dated in it fails with
// ErrPeriodClosed and writes nothing; the next period goes on.
func TestNumberingOfDatedRefusesAClosedPeriod(t *testing.T) {
	for name, newStore := range memAndBadger() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
			_, err := h.Put(ctx, "a", Till{Date: dec})
			require.NoError(t, err)
			q, err := v.Sequence("tills", sequence.Options{})
			require.NoError(t, err)
			require.NoError(t, q.ClosePeriod(ctx, "2026-12"))

			_, err = h.Put(ctx, "late", Till{Date: dec})
			assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
			_, err = vault.CollectionOf[Till](v, "tills").Get(ctx, "late")
			assert.ErrorIs(t, err, vault.ErrNotFound, "nothing written")
			r, err := h.Put(ctx, "b", Till{Date: dec.AddDate(0, 0, 1)})
			require.NoError(t, err)
			assert.Equal(t, "T202701-001", r.Value.No)
		})
	}
}

// The store puts a period's counter back below a number the ledger
// records: the next Put dated in that period, in a new process, fails with
// ErrRollback and takes no number.
func TestNumberingOfDatedPeriodCounterRolledBackIsRollback(t *testing.T) {
	for name, newAdv := range adversaries() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := newAdv(t)
			_, v := openSession(t, adv.Store(), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
			for _, id := range []string{"a", "b"} {
				_, err := h.Put(ctx, id, Till{Date: dec})
				require.NoError(t, err)
			}
			snap, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, err = h.Put(ctx, "c", Till{Date: dec})
			require.NoError(t, err)
			require.NoError(t, adv.Restore(ctx, snap, "v/books/_sequences/tills\x00"))

			_, v2 := openSession(t, adv.Store(), "")
			h2 := monthly(t, v2, loc)
			r, err := h2.Put(ctx, "d", Till{Date: dec})
			assert.ErrorIs(t, err, noydb.ErrRollback)
			assert.Zero(t, r.Serial.N, "3 was given already")
			_, err = vault.CollectionOf[Till](v2, "tills").Get(ctx, "d")
			assert.ErrorIs(t, err, vault.ErrNotFound)
		})
	}
}

// A handle numbering by another period, fiscal start or zone than the
// series' stored definition is refused with ErrDefinitionMismatch before
// it numbers anything; so is NumberingOf (no date) on a series stored with
// a period.
func TestNumberingOfDatedChecksTheStoredDefinition(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, memAndBadger()["memstore"](t), "")
	loc := rome(t)
	h := monthly(t, v, loc)
	dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
	_, err := h.Put(ctx, "a", Till{Date: dec})
	require.NoError(t, err)
	c := vault.CollectionOf[Till](v, "tills")
	for name, opts := range map[string]sequence.Options{
		"year":  {Period: sequence.PeriodYear, Location: loc},
		"utc":   {Period: sequence.PeriodMonth},
		"start": {Period: sequence.PeriodMonth, Location: loc, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}},
	} {
		other, err := vault.NumberingOfDated(c, "tills", opts, setTill, tillDate)
		require.NoError(t, err, name)
		_, err = other.Put(ctx, "x", Till{Date: dec})
		assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch, name)
	}
	plain, err := vault.NumberingOf(c, "tills", sequence.Options{}, setTill)
	require.NoError(t, err)
	_, err = plain.Put(ctx, "x", Till{Date: dec})
	assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch)
	_, err = plain.Get(ctx, "a")
	assert.ErrorIs(t, err, sequence.ErrDefinitionMismatch, "a read does not render it without its date")
	_, err = c.Get(ctx, "x")
	assert.ErrorIs(t, err, vault.ErrNotFound, "nothing written")
}
