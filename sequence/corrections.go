package sequence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/noydb-go/noydb/internal/wire"
)

// Corrections. A series whose definition names another in Corrects (credit
// notes correcting invoices) takes a number only for a correction: through
// a handle of Correcting, which names the number corrected. The allocation
// of that number records, in its own ledger entry (a number-allocated entry
// whose reason reads `corrects "invoices" period FY2026-27 number 3`), the
// corrected series, partition, period and number; Audit reads the pair
// back on both sides.

// Ref names one number of a series.
type Ref struct {
	// Series is the series. In a Correcting call, "" means the series the
	// correcting series' definition names (Options.Corrects); any other
	// name must be that one.
	Series string
	// Partition is the partition in canonical text form (integers in
	// decimal, as Sequence.Partition returns it), without the period; nil
	// for a series without partition.
	Partition []string
	// Period is the label of the number's period (Serial.Period), "" for
	// a series without periods.
	Period string
	// N is the number.
	N uint64
}

// String writes r as the ledger does: "invoices"["shop1"] period FY2026-27 number 3.
func (r Ref) String() string {
	s := wire.CorrectionText(wire.CorrectionRef(r))
	return s[len("corrects "):]
}

// Correction pairs a number of a correcting series with the number of the
// corrected series it corrects.
type Correction struct {
	// By is the correcting number (a credit note).
	By Ref
	// Of is the corrected number (an invoice).
	Of Ref
}

// ErrCorrectionNeeded: a number was asked of a correcting series (its
// definition has Corrects) without naming the number it corrects: use
// Correcting. Nothing was taken.
var ErrCorrectionNeeded = errors.New("a correcting series takes numbers only for a correction (use Correcting)")

// ErrNotCorrecting: Correcting was used on a series whose definition
// corrects no other (Options.Corrects is empty). Nothing was taken.
var ErrNotCorrecting = errors.New("series corrects no other series")

// CorrectionError reports a number refused for a correction: Err is
// ErrCorrectionNeeded, ErrNotCorrecting, or why Of cannot be corrected:
// ErrNotIssued (0, or above the corrected counter: never issued),
// ErrSkipped (skipped by a seed; it also matches ErrNotIssued) or
// ErrAlreadyVoided (a voided number was cancelled: there is no document to
// correct). Nothing was taken. errors.Is matches Err.
type CorrectionError struct {
	// Series is the correcting series.
	Series string
	// Of is the number it was asked to correct (zero for ErrCorrectionNeeded).
	Of Ref
	// Err says why.
	Err error
}

// Error describes the refusal.
func (e *CorrectionError) Error() string {
	if errors.Is(e.Err, ErrCorrectionNeeded) {
		return fmt.Sprintf("sequence %q: %v", e.Series, e.Err)
	}
	return fmt.Sprintf("sequence %q: correct %s: %v", e.Series, e.Of, e.Err)
}

// Unwrap returns Err.
func (e *CorrectionError) Unwrap() error { return e.Err }

// correction is what a handle of Correcting carries.
type correction struct {
	of   Ref
	text atomic.Pointer[string] // the allocation's Reason, once checked
}

// Correcting returns a handle whose numbers correct of, a number of the
// series this series corrects (Options.Corrects): Next, NextSerial, Claim,
// Bind (and so the vault's PutNumbered) and the vault's Tx.Next given it
// take a number of q's series, for q's date (At) and partition, and record
// in the number's ledger entry which number it corrects. NextN takes only
// one number (k = 1) on it.
//
// Every call checks of first, reading the corrected series: it must be a
// number that series issued (1 to its head, in of's partition and period;
// a closed period may be corrected), not one a seed skipped, and not a
// voided one (a voided number is cancelled: there is nothing to correct).
// Otherwise the call fails with a *CorrectionError and takes nothing; a
// series that corrects nothing fails the same way (ErrNotCorrecting). A
// void of of made after a correction was taken does not undo it.
//
// The handle is cheap; of is checked at each call. A number may be
// corrected more than once (several credit notes of one invoice).
func (q *Sequence) Correcting(of Ref) *Sequence {
	if q.target {
		q = q.base
	}
	of.Partition = slices.Clone(of.Partition)
	return &Sequence{
		svc: q.svc, c: q.c, sd: q.sd, series: q.series, partition: q.partition,
		def: q.def, defined: q.defined, loc: q.loc, tmpl: q.tmpl,
		date: q.date, dated: q.dated, corr: &correction{of: of}, mustExist: q.mustExist,
	}
}

// NextCorrecting is Correcting(of).NextSerial: the next number of q's
// series, recorded as correcting of.
func (q *Sequence) NextCorrecting(ctx context.Context, of Ref) (Serial, error) {
	return q.Correcting(of).NextSerial(ctx)
}

// reason is the Reason of q's allocation entries: the correction's text
// ("" for a plain handle).
func (q *Sequence) reason() string {
	if q.corr == nil {
		return ""
	}
	if p := q.corr.text.Load(); p != nil {
		return *p
	}
	return ""
}

// checkCorrection checks that q may take a number of its series, whose
// definition is eff's: a plain handle on a series that corrects none, or a
// handle of Correcting whose number to correct exists.
func (q *Sequence) checkCorrection(ctx context.Context, eff *effective) error {
	corrects := eff.def.Corrects
	if q.corr == nil {
		if corrects != "" {
			return &CorrectionError{Series: q.series, Err: ErrCorrectionNeeded}
		}
		return nil
	}
	of := q.corr.of
	fail := func(err error) error { return &CorrectionError{Series: q.series, Of: of, Err: err} }
	if corrects == "" {
		return fail(ErrNotCorrecting)
	}
	if of.Series != "" && of.Series != corrects {
		return invalid("correction", of.Series, fmt.Sprintf("series %q corrects %q", q.series, corrects))
	}
	of.Series = corrects
	if of.N == 0 {
		return fail(fmt.Errorf("number 0: %w", ErrNotIssued))
	}
	parts := make([]any, len(of.Partition))
	for i, p := range of.Partition {
		parts[i] = p
	}
	cq, err := q.svc.Sequence(corrects, Options{Partition: parts})
	if err != nil {
		return err
	}
	if !slices.Equal(cq.partition, of.Partition) {
		return invalid("correction", fmt.Sprint(of.Partition), "partition not in canonical text form")
	}
	hs, err := cq.spec(ctx)
	if err != nil {
		return err
	}
	if !hs.eff.defined && q.svc.history != nil {
		// The corrected series read as never defined: if the history
		// records its definition, the store lost it (errDefinitionGone),
		// or another process stored it since (read again).
		recorded, err := q.svc.recordsDefinition(ctx, corrects)
		if err != nil {
			return err
		}
		if recorded {
			if err := q.svc.checkDefinition(ctx, corrects); err != nil {
				return err
			}
			if hs, err = cq.spec(ctx); err != nil {
				return err
			}
		}
	}
	t := cq
	switch {
	case hs.eff.def.Period == PeriodNone && of.Period != "":
		return invalid("correction", of.Period, fmt.Sprintf("series %q has no periods", corrects))
	case hs.eff.def.Period != PeriodNone:
		if err := checkLabel(hs.eff.def.Period, hs.eff.def.FiscalStart, of.Period); err != nil {
			return err
		}
		if t, err = q.svc.periodTarget(cq, hs, of.Period); err != nil {
			return err
		}
	}
	head, err := t.peek(ctx)
	if err != nil {
		return err
	}
	if of.N > head {
		return fail(fmt.Errorf("number %d (the counter is at %d): %w", of.N, head, ErrNotIssued))
	}
	if q.svc.history != nil {
		r, skipped, err := t.c.seededOver(ctx, of.N)
		if err != nil {
			return err
		}
		if skipped {
			return fail(fmt.Errorf("number %d (SeedTo skipped %d..%d): %w: %w", of.N, r.from, r.to, ErrSkipped, ErrNotIssued))
		}
	}
	// Issued and not skipped stays so: later checks of the same number,
	// in a caller's transaction (nextInTx), need only read its void marker.
	text := wire.CorrectionText(wire.CorrectionRef(of))
	q.svc.issued.Store(text, voidKey(t.c.key, of.N))
	if reason, voided, err := t.Voided(ctx, of.N); err != nil {
		return err
	} else if voided {
		return fail(fmt.Errorf("number %d was voided (%s): %w", of.N, strconv.Quote(reason), ErrAlreadyVoided))
	}
	q.corr.text.Store(&text)
	return nil
}

// correctionText is the Reason of a number of q, a handle of Correcting on
// a series that corrects the series corrects; ok is false when q's Ref
// names another series.
func (q *Sequence) correctionText(corrects string) (text string, ok bool) {
	of := q.corr.of
	if corrects == "" || (of.Series != "" && of.Series != corrects) {
		return "", false
	}
	of.Series = corrects
	return wire.CorrectionText(wire.CorrectionRef(of)), true
}

// splitRef is the Ref of number n on the counter partition of series:
// the partition and period apart, when series has periods.
func (s *service) splitRef(ctx context.Context, series string, counter []string, n uint64) Ref {
	r := Ref{Series: series, Partition: counter, N: n}
	if len(counter) == 0 {
		return r
	}
	sd := s.seriesOf(series)
	sd.mu.Lock()
	eff := sd.cur.Load()
	if eff == nil {
		if e, err := s.loadDefinition(ctx, sd.key); err == nil {
			eff = e
			sd.cur.Store(e)
		}
	}
	sd.mu.Unlock()
	last := counter[len(counter)-1]
	if eff != nil && eff.def.Period != PeriodNone && checkLabel(eff.def.Period, eff.def.FiscalStart, last) == nil {
		r.Partition, r.Period = counter[:len(counter)-1:len(counter)-1], last
	}
	if len(r.Partition) == 0 {
		r.Partition = nil
	}
	return r
}
