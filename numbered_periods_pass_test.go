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
	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/filestore"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file check NumberingOfDated where passes number: a
// file store (no atomic compare-and-swap), and a memory store without
// transactions (atomic compare-and-swap, so Sequence.NextAt and
// ClosePeriod work beside the passes).

// passStores are the stores where Put hands records off to a pass.
func passStores() map[string]func(testing.TB) stores.Store {
	return map[string]func(testing.TB) stores.Store{
		"filestore": func(t testing.TB) stores.Store {
			st, err := filestore.Open(t.(interface{ TempDir() string }).TempDir(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
		"memstore-cas": func(testing.TB) stores.Store {
			return faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true})
		},
	}
}

// An offline receipt dated 31 December, handed off and numbered by a pass
// run after January's receipts have numbers, takes December's next number:
// each period is counted on its own, by the record's date in the series'
// zone. Get, Lookup, the ledger (under the period's label) and AuditAt
// agree. (Before, NumberingOf refused a period, and passes had one count
// per series.)
func TestNumberingOfDatedPassNumbersInThePeriodOfTheRecordsDate(t *testing.T) {
	for name, newStore := range passStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := newStore(t)
			_, v := openSession(t, st, "")
			loc := rome(t)
			h := monthly(t, v, loc)
			require.False(t, h.Online())
			dec := time.Date(2026, time.December, 31, 23, 30, 0, 0, loc)
			jan := time.Date(2027, time.January, 2, 9, 0, 0, 0, loc)

			put := func(id string, date time.Time) vault.NumberedRecord[Till] {
				t.Helper()
				r, err := h.Put(ctx, id, Till{Date: date, Amount: len(id)})
				require.NoError(t, err)
				require.True(t, r.Pending)
				return r
			}
			put("a", dec)
			put("b", dec.Add(-time.Hour))
			rep, err := h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, rep.Assigned)
			put("c", jan)
			late := put("d", dec) // handed in in January, dated 31 December
			rep, err = h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, 2, rep.Assigned)

			for id, want := range map[string]sequence.Serial{
				"a": {N: 1, Formatted: "T202612-001", Period: "2026-12"},
				"b": {N: 2, Formatted: "T202612-002", Period: "2026-12"},
				"c": {N: 1, Formatted: "T202701-001", Period: "2027-01"},
				"d": {N: 3, Formatted: "T202612-003", Period: "2026-12"},
			} {
				g, err := h.Get(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, want, g.Serial, id)
				assert.Equal(t, want.Formatted, g.Value.No, id)
				assert.False(t, g.Pending, id)
			}
			a, ok, err := h.Lookup(ctx, late.Provisional)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, "d", a.RecordID)
			assert.Equal(t, uint64(3), a.Number)
			assert.Equal(t, "T202612-003", a.Formatted)

			var recorded []string
			for _, e := range entriesOfKind(t, v, ledger.NumberAssigned) {
				recorded = append(recorded, fmt.Sprintf("%s %v %d", e.ID, e.Partition, e.Number))
			}
			assert.ElementsMatch(t, []string{"a [2026-12] 1", "b [2026-12] 2", "c [2027-01] 1", "d [2026-12] 3"}, recorded)

			audit, err := h.AuditAt(ctx, dec)
			require.NoError(t, err)
			assert.True(t, audit.Clean(), "%+v", audit)
			assert.Equal(t, uint64(3), audit.Deferred.Last)
			assert.Equal(t, 3, audit.Deferred.Assigned)

			// A fresh process renders the same.
			_, v2 := openSession(t, st, "")
			g, err := monthly(t, v2, loc).Get(ctx, "d")
			require.NoError(t, err)
			assert.Equal(t, "T202612-003", g.Value.No)
		})
	}
}

// Many writers hand off receipts of two periods at once; one pass numbers
// each period exactly 1..N.
func TestNumberingOfDatedPassGivesEachPeriodOneToN(t *testing.T) {
	for name, newStore := range passStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			dates := []time.Time{time.Date(2026, time.December, 31, 12, 0, 0, 0, loc), time.Date(2027, time.January, 1, 12, 0, 0, 0, loc)}
			const writers = 24
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					_, err := h.Put(ctx, fmt.Sprintf("r%02d", i), Till{Date: dates[i%2], Amount: i})
					assert.NoError(t, err)
				})
			}
			wg.Wait()
			rep, err := h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, writers, rep.Assigned)
			got := map[string][]uint64{}
			for i := range writers {
				g, err := h.Get(ctx, fmt.Sprintf("r%02d", i))
				require.NoError(t, err)
				got[g.Serial.Period] = append(got[g.Serial.Period], g.Serial.N)
			}
			require.Len(t, got, 2)
			exactlyOneToN(t, got["2026-12"], writers/2)
			exactlyOneToN(t, got["2027-01"], writers/2)
		})
	}
}

// A period's passes and Sequence.At of the period take from one head: a
// number taken at write time, a pass, and again at write time give 1, 2,
// 3 in December, and the other period is untouched.
func TestNumberingOfDatedPassSharesThePeriodHeadWithTheSequence(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, passStores()["memstore-cas"](t), "")
	loc := rome(t)
	h := monthly(t, v, loc)
	q, err := v.Sequence("tills", sequence.Options{Period: sequence.PeriodMonth, Location: loc, Format: "T{YYYY}{MM}-{seq:03}"})
	require.NoError(t, err)
	dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
	s, err := q.NextSerialAt(ctx, dec)
	require.NoError(t, err)
	assert.Equal(t, "T202612-001", s.Formatted)
	_, err = h.Put(ctx, "a", Till{Date: dec})
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	require.NoError(t, err)
	g, err := h.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "T202612-002", g.Value.No)
	s, err = q.NextSerialAt(ctx, dec)
	require.NoError(t, err)
	assert.Equal(t, "T202612-003", s.Formatted)
	n, _, err := q.PeekPeriod(ctx, "2027-01")
	require.NoError(t, err)
	assert.Zero(t, n)
}

// A pass meets records dated in a closed period: it numbers none of them,
// leaves them pending, and says so with ErrPeriodClosed (how many wait,
// which period), so that someone decides what becomes of them (an
// auditor sees no number given into a closed period, and no record
// dropped). The other periods are numbered all the same.
func TestNumberingOfDatedPassRefusesAClosedPeriod(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, passStores()["memstore-cas"](t), "")
	loc := rome(t)
	h := monthly(t, v, loc)
	dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
	_, err := h.Put(ctx, "a", Till{Date: dec})
	require.NoError(t, err)
	_, err = h.Settle(ctx)
	require.NoError(t, err)
	q, err := v.Sequence("tills", sequence.Options{Period: sequence.PeriodMonth, Location: loc, Format: "T{YYYY}{MM}-{seq:03}"})
	require.NoError(t, err)
	require.NoError(t, q.ClosePeriod(ctx, "2026-12"))

	_, err = h.Put(ctx, "late", Till{Date: dec})
	require.NoError(t, err, "handed off offline: the close is met by the pass")
	_, err = h.Put(ctx, "jan", Till{Date: dec.AddDate(0, 0, 1)})
	require.NoError(t, err)
	rep, err := h.Settle(ctx)
	assert.ErrorIs(t, err, sequence.ErrPeriodClosed)
	assert.ErrorContains(t, err, "2026-12")
	assert.Equal(t, 1, rep.Assigned, "January's")
	g, err := h.Get(ctx, "late")
	require.NoError(t, err)
	assert.True(t, g.Pending, "left in line")
	assert.Zero(t, g.Serial.N)
	g, err = h.Get(ctx, "jan")
	require.NoError(t, err)
	assert.Equal(t, "T202701-001", g.Value.No)
	head, closed, err := q.PeekPeriod(ctx, "2026-12")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), head)
	assert.True(t, closed)
}

// The store puts back a period's pass head (alone, or with the period's
// counter) from before a pass, keeping its ledger: the next pass, in a new
// process, fails with ErrRollback before it gives any number.
func TestNumberingOfDatedPeriodPassHeadRolledBackIsRollback(t *testing.T) {
	for name, prefix := range map[string]string{
		"head":             "v/books/_numbering/tills/period/2026-12/head",
		"head and counter": "v/books/_numbering/tills/period/2026-12/",
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			adv := faultstore.NewAdversary(faultstore.New(memstore.New(), faultstore.Options{HideTransactor: true}))
			_, v := openSession(t, adv.Store(), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
			for _, id := range []string{"a", "b"} {
				_, err := h.Put(ctx, id, Till{Date: dec})
				require.NoError(t, err)
			}
			_, err := h.Settle(ctx)
			require.NoError(t, err)
			snap, err := adv.Snapshot(ctx)
			require.NoError(t, err)
			_, err = h.Put(ctx, "c", Till{Date: dec})
			require.NoError(t, err)
			_, err = h.Settle(ctx)
			require.NoError(t, err)
			require.NoError(t, adv.Restore(ctx, snap, prefix))
			if name == "head and counter" {
				require.NoError(t, adv.Restore(ctx, snap, "v/books/_sequences/tills\x00"))
			}

			_, v2 := openSession(t, adv.Store(), "")
			h2 := monthly(t, v2, loc)
			_, err = h2.Put(ctx, "d", Till{Date: dec})
			require.NoError(t, err)
			_, err = h2.Settle(ctx)
			assert.ErrorIs(t, err, noydb.ErrRollback)
			g, err := h2.Get(ctx, "d")
			require.NoError(t, err)
			assert.Zero(t, g.Serial.N, "3 was given already")
		})
	}
}

// A pending record keeps the period of its date: a Put moving it to
// another period is refused, nothing written; one in the same period is
// kept in line under its provisional id.
func TestNumberingOfDatedPendingRecordKeepsItsPeriod(t *testing.T) {
	ctx := context.Background()
	_, v := openSession(t, passStores()["filestore"](t), "")
	loc := rome(t)
	h := monthly(t, v, loc)
	dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
	r, err := h.Put(ctx, "a", Till{Date: dec, Amount: 1})
	require.NoError(t, err)
	again, err := h.Put(ctx, "a", Till{Date: dec.Add(-time.Hour), Amount: 2})
	require.NoError(t, err)
	assert.Equal(t, r.Provisional, again.Provisional)
	_, err = h.Put(ctx, "a", Till{Date: dec.AddDate(0, 0, 1), Amount: 3})
	assert.ErrorIs(t, err, vault.ErrInvalidArgument)
	g, err := h.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, 2, g.Value.Amount)
	_, err = h.Settle(ctx)
	require.NoError(t, err)
	g, err = h.Get(ctx, "a")
	require.NoError(t, err)
	assert.Equal(t, "T202612-001", g.Value.No)
}

// A pass whose handle reads no date in the records it would number (its
// date getter reads another field: the command line's --date-field
// misspelt), with a format that renders dates, is refused with
// ErrInvalidArgument before its batch is committed: no number is taken,
// nothing is written, and a pass with the right getter then numbers the
// period as if the bad one had never run (a new batch from 1, nothing to
// resume).
func TestNumberingOfDatedPassWithoutTheRecordsDateTakesNoNumber(t *testing.T) {
	for name, newStore := range passStores() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			_, v := openSession(t, newStore(t), "")
			loc := rome(t)
			h := monthly(t, v, loc)
			dec := time.Date(2026, time.December, 31, 12, 0, 0, 0, loc)
			for _, id := range []string{"a", "b"} {
				_, err := h.Put(ctx, id, Till{Date: dec})
				require.NoError(t, err)
			}
			before := ledgerHead(t, v)
			blind, err := vault.NumberingOfDated(vault.CollectionOf[Till](v, "tills"), "tills",
				sequence.Options{Period: sequence.PeriodMonth, Location: loc, Format: "T{YYYY}{MM}-{seq:03}"},
				setTill, func(*Till) time.Time { return time.Time{} })
			require.NoError(t, err)
			rep, err := blind.Settle(ctx)
			require.ErrorIs(t, err, vault.ErrInvalidArgument)
			assert.Zero(t, rep.Batch, "a batch committed")
			assert.Equal(t, before, ledgerHead(t, v), "the ledger moved")
			infos, err := v.SeriesNamed(ctx, "tills")
			require.NoError(t, err)
			for _, si := range infos {
				assert.Zero(t, si.Head, "period %s: numbers taken", si.Period)
			}

			rep, err = h.Settle(ctx)
			require.NoError(t, err)
			assert.Equal(t, uint64(1), rep.Batch)
			assert.Equal(t, 2, rep.Assigned)
			assert.Zero(t, rep.Resumed, "a batch of the refused pass resumed")
			for id, want := range map[string]string{"a": "T202612-001", "b": "T202612-002"} {
				g, err := h.Get(ctx, id)
				require.NoError(t, err)
				assert.Equal(t, want, g.Value.No, id)
			}
		})
	}
}
