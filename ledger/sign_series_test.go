package ledger_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/stores"
)

// TestSignedBoundSeries: a person limited to some collections writes
// entries naming a series only when an owner bound it to one of theirs
// before the entry (a SeriesBound entry, or the owner's own numbered
// record there); anything else fails Verify at its position with
// UnboundSeries. A limited person's own numbered record binds nothing,
// nor can anyone but an owner bind; a person given every collection
// numbers any series.
func TestSignedBoundSeries(t *testing.T) {
	ctx := context.Background()
	grant := func(user string, s *edSigner, cols ...string) ledger.Entry {
		return ledger.Entry{Kind: ledger.PersonGranted, ID: user, Reason: "writer", SigningKey: s.Public(), Partition: cols}
	}
	bind := func(series, coll string) ledger.Entry {
		return ledger.Entry{Kind: ledger.SeriesBound, Series: series, Collection: coll}
	}
	take := func(series string, n uint64) ledger.Entry {
		return ledger.Entry{Kind: ledger.NumberAllocated, Series: series, Number: n}
	}
	numbered := func(coll, series string, n uint64) ledger.Entry {
		return ledger.Entry{Kind: ledger.RecordPut, Collection: coll, ID: "r", Revision: 1,
			CipherHash: bytes.Repeat([]byte{1}, 32), Series: series, Number: n}
	}
	setup := func(t *testing.T) (stores.Store, *ledger.Ledger, *ledger.Ledger) {
		st := storeKinds[0].make()
		owner := signedOn(st, "olga", olga, nil)
		_, err := owner.Append(ctx, fact(1))
		require.NoError(t, err)
		_, err = owner.Append(ctx, grant("will", will, "customers", "notes"))
		require.NoError(t, err)
		return st, owner, signedOn(st, "will", will, nil)
	}
	for name, tc := range map[string]struct {
		owner []ledger.Entry // what the owner writes first
		will  ledger.Entry   // what will writes then
		bad   bool
	}{
		"a number of an unbound series":        {will: take("invoices", 1), bad: true},
		"a void of an unbound series":          {will: ledger.Entry{Kind: ledger.NumberVoided, Series: "invoices", Number: 1}, bad: true},
		"a seed of an unbound series":          {will: ledger.Entry{Kind: ledger.SeriesSeeded, Series: "invoices", Number: 5}, bad: true},
		"a period closed of an unbound series": {will: ledger.Entry{Kind: ledger.PeriodClosed, Series: "invoices", Partition: []string{"2026"}}, bad: true},
		"a numbered record, numbering first":   {will: numbered("customers", "invoices", 1), bad: true},
		"a series bound elsewhere":             {owner: []ledger.Entry{bind("invoices", "sales")}, will: take("invoices", 1), bad: true},
		"a series bound to theirs":             {owner: []ledger.Entry{bind("invoices", "customers")}, will: take("invoices", 1)},
		"a void of a bound series":             {owner: []ledger.Entry{bind("invoices", "notes")}, will: ledger.Entry{Kind: ledger.NumberVoided, Series: "invoices", Number: 1}},
		"bound by the owner's numbered record": {owner: []ledger.Entry{numbered("customers", "cust", 1)}, will: take("cust", 2)},
		"bound by the owner's pass":            {owner: []ledger.Entry{{Kind: ledger.NumberAssigned, Collection: "customers", ID: "c-1", Series: "cust", Number: 1}}, will: take("cust", 2)},
		"the owner's record elsewhere":         {owner: []ledger.Entry{numbered("sales", "cust", 1)}, will: take("cust", 2), bad: true},
		"a limited person binds":               {will: bind("invoices", "customers"), bad: true},
	} {
		t.Run(name, func(t *testing.T) {
			_, owner, writer := setup(t)
			if len(tc.owner) > 0 {
				_, err := owner.Append(ctx, tc.owner...)
				require.NoError(t, err)
			}
			_, err := writer.Append(ctx, tc.will)
			require.NoError(t, err)
			at := uint64(3 + len(tc.owner))
			if !tc.bad {
				verifyClean(t, owner, at)
				return
			}
			problem := ledger.UnboundSeries
			if tc.will.Kind == ledger.SeriesBound {
				problem = ledger.NotPermitted
			}
			sigProblem(t, owner, at, problem)
		})
	}
	t.Run("a limited person's numbered record binds nothing", func(t *testing.T) {
		st, owner, _ := setup(t)
		_, err := owner.Append(ctx, grant("rex", rita), bind("notes-seq", "notes"))
		require.NoError(t, err)
		// rex, given every collection, numbers any series; his numbered
		// record does not bind it for will.
		_, err = signedOn(st, "rex", rita, nil).Append(ctx, numbered("customers", "free", 1), take("other", 1))
		require.NoError(t, err)
		verifyClean(t, owner, 6)
		_, err = signedOn(st, "will", will, nil).Append(ctx, take("free", 2))
		require.NoError(t, err)
		sigProblem(t, owner, 7, ledger.UnboundSeries)
	})
}
