package sequence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/stores/memstore"
	"github.com/noydb-go/noydb/vault"
)

// The tests of this file check credit notes: a series declared with
// Options.Corrects takes numbers only for a correction, and the ledger
// entry of each such number names the number it corrects.

func openBooks(t *testing.T, st stores.Store) *vault.Vault {
	t.Helper()
	v, err := vault.Open(context.Background(), vault.Config{
		Store: st, Name: "books", User: "firm", Secret: []byte("s"),
		KDF: crypto.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, InsecureAllowWeakKDF: true,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	return v
}

// fiscalBooks returns an invoice series counting by fiscal year from 1
// April in Rome, and a credit-note series correcting it.
func fiscalBooks(t *testing.T, v *vault.Vault) (invoices, credits *sequence.Sequence) {
	t.Helper()
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	fy := sequence.Options{Period: sequence.PeriodFiscalYear, FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}, Location: rome}
	inv := fy
	inv.Format = "{seq:04}"
	invoices, err = v.Sequence("invoices", inv)
	require.NoError(t, err)
	cn := fy
	cn.Format = "NC-{seq:03}"
	cn.Corrects = "invoices"
	credits, err = v.Sequence("credit-notes", cn)
	require.NoError(t, err)
	return invoices, credits
}

// allocations returns the number-allocated entries of series.
func allocations(t *testing.T, v *vault.Vault, series string) []ledger.Entry {
	t.Helper()
	var out []ledger.Entry
	for e, err := range v.Audit().Read(context.Background(), 1) {
		require.NoError(t, err)
		if e.Kind == ledger.NumberAllocated && e.Series == series {
			out = append(out, e)
		}
	}
	return out
}

func TestCorrectionRecordsThePair(t *testing.T) {
	ctx := context.Background()
	v := openBooks(t, memstore.New())
	invoices, credits := fiscalBooks(t, v)
	may := time.Date(2026, time.May, 4, 10, 0, 0, 0, time.UTC)
	for i := 1; i <= 3; i++ {
		s, err := invoices.NextSerialAt(ctx, may)
		require.NoError(t, err)
		require.Equal(t, sequence.Serial{N: uint64(i), Formatted: fmt.Sprintf("%04d", i), Period: "FY2026-27"}, s)
	}
	of := sequence.Ref{Period: "FY2026-27", N: 2}
	s, err := credits.At(may).NextCorrecting(ctx, of)
	require.NoError(t, err)
	assert.Equal(t, sequence.Serial{N: 1, Formatted: "NC-001", Period: "FY2026-27"}, s)

	// One ledger entry: the allocation, naming what it corrects.
	entries := allocations(t, v, "credit-notes")
	require.Len(t, entries, 1)
	assert.Equal(t, []string{"FY2026-27"}, entries[0].Partition)
	assert.Equal(t, uint64(1), entries[0].Number)
	assert.Equal(t, `corrects "invoices" period FY2026-27 number 2`, entries[0].Reason)

	pair := sequence.Correction{
		By: sequence.Ref{Series: "credit-notes", Period: "FY2026-27", N: 1},
		Of: sequence.Ref{Series: "invoices", Period: "FY2026-27", N: 2},
	}
	rep, err := credits.At(may).Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, []sequence.Correction{pair}, rep.Corrections)
	assert.Empty(t, rep.CorrectedBy)
	rep, err = invoices.At(may).Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, []sequence.Correction{pair}, rep.CorrectedBy)
	assert.Empty(t, rep.Corrections)
	// Another period of the invoices knows nothing of it.
	rep, err = invoices.At(may.AddDate(-1, 0, 0)).Audit(ctx)
	require.NoError(t, err)
	assert.Empty(t, rep.CorrectedBy)
	assert.Equal(t, `"invoices" period FY2026-27 number 2`, pair.Of.String())
}

func TestCorrectionOfAnUnpartitionedSeriesFromAPartitionedOne(t *testing.T) {
	ctx := context.Background()
	v := openBooks(t, memstore.New())
	invoices, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	credits, err := v.Sequence("cn", sequence.Options{Partition: []any{"shop", 7}, Corrects: "inv"})
	require.NoError(t, err)
	_, err = invoices.NextN(ctx, 5)
	require.NoError(t, err)
	for _, n := range []uint64{5, 1, 5} { // a number may be corrected twice
		_, err := credits.NextCorrecting(ctx, sequence.Ref{Series: "inv", N: n})
		require.NoError(t, err)
	}
	rep, err := invoices.Audit(ctx)
	require.NoError(t, err)
	by := func(n uint64) sequence.Ref { return sequence.Ref{Series: "cn", Partition: []string{"shop", "7"}, N: n} }
	of := func(n uint64) sequence.Ref { return sequence.Ref{Series: "inv", N: n} }
	want := []sequence.Correction{{By: by(1), Of: of(5)}, {By: by(2), Of: of(1)}, {By: by(3), Of: of(5)}}
	assert.Equal(t, want, rep.CorrectedBy)
	rep, err = credits.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, rep.Corrections)
}

func TestCorrectionRefusalsTakeNothing(t *testing.T) {
	ctx := context.Background()
	v := openBooks(t, memstore.New())
	invoices, credits := fiscalBooks(t, v)
	may := time.Date(2026, time.May, 4, 10, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		_, err := invoices.NextAt(ctx, may)
		require.NoError(t, err)
	}
	require.NoError(t, invoices.At(may).Void(ctx, 3, "typo"))
	_, err := invoices.At(may.AddDate(-2, 0, 0)).NextN(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, invoices.At(may.AddDate(-2, 0, 0)).SeedTo(ctx, 10))
	cm := credits.At(may)

	for _, c := range []struct {
		name string
		call func() error
		want error
	}{
		{"plain Next", func() error { _, err := cm.Next(ctx); return err }, sequence.ErrCorrectionNeeded},
		{"plain NextN", func() error { _, err := cm.NextN(ctx, 1); return err }, sequence.ErrCorrectionNeeded},
		{"plain Claim", func() error { _, err := cm.Claim(ctx, sequence.NewRequestID()); return err }, sequence.ErrCorrectionNeeded},
		{"never issued", func() error {
			_, err := cm.NextCorrecting(ctx, sequence.Ref{Period: "FY2026-27", N: 4})
			return err
		}, sequence.ErrNotIssued},
		{"number 0", func() error { _, err := cm.NextCorrecting(ctx, sequence.Ref{Period: "FY2026-27"}); return err }, sequence.ErrNotIssued},
		{"an empty period", func() error {
			_, err := cm.NextCorrecting(ctx, sequence.Ref{Period: "FY2020-21", N: 1})
			return err
		}, sequence.ErrNotIssued},
		{"voided", func() error {
			_, err := cm.NextCorrecting(ctx, sequence.Ref{Period: "FY2026-27", N: 3})
			return err
		}, sequence.ErrAlreadyVoided},
		{"skipped by a seed", func() error {
			_, err := cm.NextCorrecting(ctx, sequence.Ref{Period: "FY2024-25", N: 5})
			return err
		}, sequence.ErrSkipped},
		{"a calendar year label", func() error {
			_, err := cm.NextCorrecting(ctx, sequence.Ref{Period: "2026", N: 1})
			return err
		}, sequence.ErrInvalid},
		{"no period", func() error { _, err := cm.NextCorrecting(ctx, sequence.Ref{N: 1}); return err }, sequence.ErrInvalid},
		{"another series", func() error {
			_, err := cm.NextCorrecting(ctx, sequence.Ref{Series: "orders", Period: "FY2026-27", N: 1})
			return err
		}, sequence.ErrInvalid},
		{"several at once", func() error {
			_, err := cm.Correcting(sequence.Ref{Period: "FY2026-27", N: 1}).NextN(ctx, 2)
			return err
		}, sequence.ErrInvalid},
		{"a series that corrects nothing", func() error {
			_, err := invoices.At(may).NextCorrecting(ctx, sequence.Ref{Period: "FY2026-27", N: 1})
			return err
		}, sequence.ErrNotCorrecting},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(allocations(t, v, "credit-notes"))
			err := c.call()
			require.ErrorIs(t, err, c.want)
			if !errors.Is(c.want, sequence.ErrInvalid) {
				var ce *sequence.CorrectionError
				assert.ErrorAs(t, err, &ce)
			}
			assert.Len(t, allocations(t, v, "credit-notes"), before)
			head, err := cm.Peek(ctx)
			require.NoError(t, err)
			assert.Zero(t, head)
		})
	}
	// Numbers 1 and 2 of the current year can be corrected; a closed
	// period's numbers too.
	require.NoError(t, invoices.ClosePeriod(ctx, "FY2024-25"))
	_, err = cm.NextCorrecting(ctx, sequence.Ref{Period: "FY2024-25", N: 1})
	require.NoError(t, err)
	_, err = cm.NextCorrecting(ctx, sequence.Ref{Period: "FY2026-27", N: 2})
	require.NoError(t, err)
	assert.Len(t, allocations(t, v, "credit-notes"), 2)
}

type note struct {
	Number, Of string
}

func TestCorrectionThroughPutNumberedAndUpdate(t *testing.T) {
	ctx := context.Background()
	v := openBooks(t, memstore.New())
	invoices, err := v.Sequence("inv", sequence.Options{Format: "F-{seq}"})
	require.NoError(t, err)
	credits, err := v.Sequence("cn", sequence.Options{Format: "NC-{seq}", Corrects: "inv"})
	require.NoError(t, err)
	_, err = invoices.NextN(ctx, 3)
	require.NoError(t, err)
	notes := vault.CollectionOf[note](v, "notes")

	got, err := notes.PutNumbered(ctx, "n1", credits.Correcting(sequence.Ref{N: 2}), func(s sequence.Serial) (note, error) {
		return note{Number: s.Formatted, Of: "F-2"}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, note{Number: "NC-1", Of: "F-2"}, got)
	_, err = notes.PutNumbered(ctx, "n2", credits, func(s sequence.Serial) (note, error) { return note{Number: s.Formatted}, nil })
	require.ErrorIs(t, err, sequence.ErrCorrectionNeeded)

	err = v.Update(ctx, func(tx *vault.Tx) error {
		s, err := tx.Next(credits.Correcting(sequence.Ref{N: 3}))
		if err != nil {
			return err
		}
		return notes.In(tx).Put("n3", note{Number: s.Formatted, Of: "F-3"})
	})
	require.NoError(t, err)
	err = v.Update(ctx, func(tx *vault.Tx) error { _, err := tx.Next(credits); return err })
	require.ErrorIs(t, err, sequence.ErrCorrectionNeeded)
	err = v.Update(ctx, func(tx *vault.Tx) error { _, err := tx.Next(credits.Correcting(sequence.Ref{N: 9})); return err })
	require.ErrorIs(t, err, sequence.ErrNotIssued)
	// Invoice 3, once corrected in a transaction, is then voided: the
	// void marker is read in the next correction's transaction.
	require.NoError(t, invoices.Void(ctx, 3, "cancelled"))
	err = v.Update(ctx, func(tx *vault.Tx) error { _, err := tx.Next(credits.Correcting(sequence.Ref{N: 3})); return err })
	require.ErrorIs(t, err, sequence.ErrAlreadyVoided)
	var ce *sequence.CorrectionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, uint64(3), ce.Of.N)

	rep, err := invoices.Audit(ctx)
	require.NoError(t, err)
	by := func(n uint64) sequence.Ref { return sequence.Ref{Series: "cn", N: n} }
	of := func(n uint64) sequence.Ref { return sequence.Ref{Series: "inv", N: n} }
	assert.Equal(t, []sequence.Correction{{By: by(1), Of: of(2)}, {By: by(2), Of: of(3)}}, rep.CorrectedBy)
	rep, err = credits.Audit(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), rep.Head)
	assert.Equal(t, 1, rep.Bound) // PutNumbered binds; a Put in Update does not name the number
}

func TestCorrectionsConcurrent(t *testing.T) {
	ctx := context.Background()
	v := openBooks(t, memstore.New())
	invoices, err := v.Sequence("inv", sequence.Options{})
	require.NoError(t, err)
	credits, err := v.Sequence("cn", sequence.Options{Corrects: "inv"})
	require.NoError(t, err)
	const n = 64
	_, err = invoices.NextN(ctx, n)
	require.NoError(t, err)
	got := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := credits.NextCorrecting(ctx, sequence.Ref{N: uint64(i + 1)})
			assert.NoError(t, err)
			got[i] = s.N
		}()
	}
	wg.Wait()
	requireExactly(t, got, n)
	// Each credit note names the invoice its caller asked for.
	rep, err := credits.Audit(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Corrections, n)
	for _, c := range rep.Corrections {
		assert.Equal(t, got[c.Of.N-1], c.By.N, "the correction of invoice %d", c.Of.N)
	}
	rep, err = invoices.Audit(ctx)
	require.NoError(t, err)
	assert.Len(t, rep.CorrectedBy, n)
}

// A store that drops or forges the entry of a correction cannot make the
// audit show another pair: the ledger's chain fails, and with it both
// audits.
func TestCorrectionEntryDroppedOrForged(t *testing.T) {
	for _, how := range []string{"dropped", "forged"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			st := memstore.New()
			v := openBooks(t, st)
			invoices, err := v.Sequence("inv", sequence.Options{})
			require.NoError(t, err)
			credits, err := v.Sequence("cn", sequence.Options{Corrects: "inv"})
			require.NoError(t, err)
			_, err = invoices.NextN(ctx, 3)
			require.NoError(t, err)
			_, err = credits.NextCorrecting(ctx, sequence.Ref{N: 1})
			require.NoError(t, err)
			_, err = credits.NextCorrecting(ctx, sequence.Ref{N: 2})
			require.NoError(t, err)
			_, err = invoices.Next(ctx) // an entry after them: a dropped one is a gap
			require.NoError(t, err)
			entries := allocations(t, v, "cn")
			require.Len(t, entries, 2)
			keyOf := func(seq uint64) string {
				for k := range listing(t, st) {
					if i := strings.Index(k, "_ledger/"); i >= 0 {
						if n, err := strconv.ParseUint(k[i+len("_ledger/"):], 10, 64); err == nil && n == seq {
							return k
						}
					}
				}
				t.Fatalf("no ledger key for entry %d", seq)
				return ""
			}
			target := keyOf(entries[1].Seq)
			switch how {
			case "dropped":
				require.NoError(t, st.Delete(ctx, target))
			case "forged": // the first correction's sealed entry, moved to the second's place
				first, err := st.Get(ctx, keyOf(entries[0].Seq))
				require.NoError(t, err)
				_, err = st.Put(ctx, target, first.Value)
				require.NoError(t, err)
			}
			_, err = v.Audit().Verify(ctx)
			assert.ErrorIs(t, err, ledger.ErrTampered)
			_, err = credits.Audit(ctx)
			assert.ErrorIs(t, err, ledger.ErrTampered)
			_, err = invoices.Audit(ctx)
			assert.ErrorIs(t, err, ledger.ErrTampered)
		})
	}
}
