package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/noydb-go/noydb/internal/deferred"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
)

// Periods on the pass path. A handle numbering by the record's date
// (NumberingOfDated) on a store where passes number hands each record off
// to the deferred series of the period of its date (a numbering.Series
// whose numbers are the period's: it shares the period's counter with
// Sequence.At, and records its numbers under the period's label), and
// Settle runs a pass of every period that had records handed off. So a
// receipt dated 31 December and handed off offline is numbered in
// December by a pass run in January.

// periodSeries is the deferred series of one period of a handle's series.
type periodSeries struct {
	ns     *numbering.Series
	hooks  deferred.Hooks
	listed bool // its periods entry is written (this process wrote it)
}

// period returns the deferred series of the period label of the handle's
// series: the series' own for "" (a handle without periods).
func (n *Numbered[T]) period(label string) (*periodSeries, error) {
	if label == "" {
		return &periodSeries{ns: n.ns, hooks: n.hooks, listed: true}, nil
	}
	n.pmu.Lock()
	defer n.pmu.Unlock()
	if p := n.periods[label]; p != nil {
		return p, nil
	}
	ns, hooks, err := n.c.v.numberingPeriod(n.series, numbering.Options{Collection: n.c.name, Format: n.opts.Format},
		stampRecords{apply: n.apply, partition: []string{label}, render: n.render})
	if err != nil {
		return nil, err
	}
	if n.periods == nil {
		n.periods = map[string]*periodSeries{}
	}
	p := &periodSeries{ns: ns, hooks: hooks}
	n.periods[label] = p
	return p, nil
}

// list writes the entry that lists p's period among its series' (once per
// process), so Settle finds the period.
func (n *Numbered[T]) list(ctx context.Context, p *periodSeries) error {
	n.pmu.Lock()
	listed := p.listed
	n.pmu.Unlock()
	if listed {
		return nil
	}
	key, value, err := p.hooks.Period()
	if err != nil {
		return err
	}
	if _, err := n.c.v.store.Put(ctx, key, value); err != nil {
		return err
	}
	n.pmu.Lock()
	p.listed = true
	n.pmu.Unlock()
	return nil
}

// periodOfBody is the period label of the record whose JSON is body, by
// its date ("" for a handle without periods, or a body without a date).
func (n *Numbered[T]) periodOfBody(body []byte) (string, error) {
	if n.date == nil || n.opts.Period == sequence.PeriodNone {
		return "", nil
	}
	var val T
	if err := json.Unmarshal(body, &val); err != nil {
		return "", fmt.Errorf("decode: %w", err)
	}
	d := n.date(&val)
	if d.IsZero() {
		return "", nil
	}
	return n.periodOf(d), nil
}

// render gives the number s the text the date of the record whose JSON is
// body renders (stampRecords.render), in the format Get renders it with. A
// format with date tokens refuses a record without a date
// (ErrInvalidArgument) rather than render today's: a pass refuses it
// while it plans its batch (stampRecords.NumberToPlan), taking no number.
func (n *Numbered[T]) render(body []byte, s sequence.Serial) (sequence.Serial, error) {
	var val T
	if err := json.Unmarshal(body, &val); err != nil {
		return s, fmt.Errorf("decode: %w", err)
	}
	d := n.date(&val)
	n.mu.Lock()
	f := n.format
	n.mu.Unlock()
	switch {
	case f == nil || !f.Dated():
		return s, nil
	case d.IsZero():
		// Rendered with today's date, the number would read otherwise
		// than the record's own date will (Get) and the ledger keeps.
		return s, fmt.Errorf("%w: the record has no date (the zero time.Time) to render its number with", ErrInvalidArgument)
	}
	s.Formatted = f.FormatAt(s.N, d)
	return s, nil
}

// settlePeriods runs a pass of every period of the series that had
// records handed off, in order (Settle of a handle numbering by the
// record's date). A closed period numbers nothing and leaves its records
// in line: its error (matching sequence.ErrPeriodClosed) is returned,
// joined with the others', after the other periods' passes ran. Any other
// error ends it. The report sums the passes' and lists each in Periods;
// its Batch, First and Last are those of the last period that recorded a
// batch.
func (n *Numbered[T]) settlePeriods(ctx context.Context) (numbering.PassReport, error) {
	var rep numbering.PassReport
	// The render of the passes' stamps needs the stored format.
	if err := n.prepare(ctx, false); err != nil {
		return rep, fmt.Errorf("numbering %q: pass: %w", n.series, err)
	}
	if n.opts.Period == sequence.PeriodNone {
		return n.ns.RunPass(ctx)
	}
	labels, err := n.hooks.Periods(ctx)
	if err != nil {
		return rep, err
	}
	var closed []error
	for _, label := range labels {
		p, err := n.period(label)
		if err != nil {
			return rep, err
		}
		r, err := p.ns.RunPass(ctx)
		rep.Assigned += r.Assigned
		rep.Voided += r.Voided
		rep.Resumed += r.Resumed
		rep.Skipped += r.Skipped
		rep.Waiting += r.Waiting
		rep.Closed += r.Closed
		if r.Batch != 0 {
			rep.Batch, rep.First, rep.Last = r.Batch, r.First, r.Last
		}
		if err != nil {
			err = fmt.Errorf("period %s: %w", label, err)
		}
		rep.Periods = append(rep.Periods, numbering.PeriodPass{Period: label, Report: r, Err: err})
		if errors.Is(err, sequence.ErrPeriodClosed) {
			closed = append(closed, err)
			continue
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, errors.Join(closed...)
}

// lookupPeriods is Lookup of a handle with periods: the provisional id is
// looked up in every period.
func (n *Numbered[T]) lookupPeriods(ctx context.Context, provisional string) (numbering.Assignment, bool, error) {
	labels, err := n.hooks.Periods(ctx)
	if err != nil {
		return numbering.Assignment{}, false, err
	}
	for _, label := range labels {
		p, err := n.period(label)
		if err != nil {
			return numbering.Assignment{}, false, err
		}
		a, ok, err := p.ns.LookupProvisional(ctx, provisional)
		if err != nil {
			return numbering.Assignment{}, false, err
		}
		if ok && a.Provisional == provisional {
			return a, true, nil
		}
	}
	return numbering.Assignment{}, false, nil
}

// AuditAt is Audit of the period holding date (a handle numbering by the
// record's date, NumberingOfDated, with a period): every number of that
// period, on both paths, in Online, and what the period's passes recorded
// in Deferred. For a handle without periods it is Audit. On a device of
// a hub it audits the hub's ledger, where the numbers are.
func (n *Numbered[T]) AuditAt(ctx context.Context, date time.Time) (NumberedAudit, error) {
	if n.onHub != nil {
		return n.onHub.AuditAt(ctx, date)
	}
	label := n.periodOf(date)
	if label == "" || date.IsZero() {
		return n.Audit(ctx)
	}
	rep := NumberedAudit{Series: n.series}
	if err := n.c.v.enter(ctx); err != nil {
		return rep, fmt.Errorf("numbering %q: audit: %w", n.series, err)
	}
	defer n.c.v.exit()
	// The series' definition as stored (its format, when the handle asks
	// for none), else the handle's.
	def, err := n.definition(ctx)
	if err != nil {
		return rep, err
	}
	o := sequence.Options{Format: n.opts.Format, Period: n.opts.Period, FiscalStart: n.opts.FiscalStart, Location: n.opts.Location}
	if !def.IsZero() {
		o.Format = def.Format
	}
	q, err := n.c.v.Sequence(n.series, o)
	if err != nil {
		return rep, err
	}
	if rep.Online, err = q.At(date).Audit(ctx); err != nil {
		return rep, err
	}
	p, err := n.period(label)
	if err != nil {
		return rep, err
	}
	rep.Deferred, err = p.ns.Audit(ctx)
	return rep, err
}

// keepsPeriod refuses, with ErrInvalidArgument, a Put that would move the
// record id, pending under provisional, to the period label: its handoff
// entry is in the period of its date when it was handed off, and a pass of
// that period numbers it. On a device, a record the hub numbered since the
// last sync is ErrConflict instead (numberedOnHub).
func (n *Numbered[T]) keepsPeriod(ctx context.Context, p *periodSeries, provisional, id, label string) error {
	if provisional == "" || label == "" {
		return nil
	}
	key, _, err := p.hooks.Handoff(provisional, id)
	if err != nil {
		return err
	}
	_, err = n.c.v.store.Get(ctx, key)
	if !errors.Is(err, stores.ErrNotFound) {
		return err
	}
	if err := n.numberedOnHub(ctx, provisional, id, label); err != nil {
		return err
	}
	return fmt.Errorf("%w: the record waits for a number in another period than %s, that of its new date: delete it and put it again", ErrInvalidArgument, label)
}

// numberedOnHub is keepsPeriod's check, on a device of a hub, of a record
// whose handoff entry is not in the period label of its new date although
// the record as stored here is dated in that period too: the hub's pass
// numbered it there (settleOnHub forgets the device's entries of the
// records it numbered) and no sync has brought the stamped record yet.
// That is an error wrapping ErrConflict (sync first), not a move to
// another period; nil otherwise.
func (n *Numbered[T]) numberedOnHub(ctx context.Context, provisional, id, label string) error {
	if n.onHub == nil {
		return nil
	}
	prev, err := n.read(ctx, id)
	if err != nil {
		return err
	}
	if was, err := n.periodOfBody(prev.body); err != nil || was != label {
		return err // moved to another period (or stored without a date)
	}
	hp, err := n.onHub.period(label)
	if err != nil {
		return err
	}
	a, ok, err := hp.ns.LookupProvisional(ctx, provisional)
	switch {
	case err != nil:
		return err
	case ok && a.Provisional == provisional:
		return fmt.Errorf("%w: the hub numbered the record (%s) since this device last synced: sync, then put it again", ErrConflict, a.Formatted)
	}
	return nil
}
