package sequence

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/noydb-go/noydb/internal/wire"
)

// Periods. A series with a Period counts each period on its own counter:
// the period's label (periodLabel: 2026, 2026-03, FY2025-26…) is appended
// to the handle's partition, so Partition ["shop1"] with PeriodYear counts
// under ["shop1", "2026"]. A handle resolves, at each call, to the handle
// of the period holding its date (At) or the current date: a target. A
// target is a *Sequence of its own, cached by the service per counter, on
// which the methods of sequence.go and combiner.go run unchanged.

// At returns a handle on the period of q's series that holds date, read
// in the series' time zone: Next, NextSerial, NextN, Claim, SeedTo, Bind,
// Peek, Audit, Void and Voided act on that period's counter, and the vault's
// PutNumbered and Tx.Next given it number into that period. On a series
// without periods At's handle is q's counter, with date used to render the
// format's date tokens. The handle is cheap; its period is chosen at its
// first call, once the series' definition is known. On a series with
// periods, a date whose period starts in a year outside 0000 to 9999 (no
// label ClosePeriod reads names it), or the zero time.Time, is refused
// with a *ValidationError.
func (q *Sequence) At(date time.Time) *Sequence {
	if q.target {
		q = q.base
	}
	at := &Sequence{
		svc: q.svc, c: q.c, sd: q.sd, series: q.series, partition: q.partition,
		def: q.def, defined: q.defined, loc: q.loc, tmpl: q.tmpl,
		date: date, dated: true, corr: q.corr, mustExist: q.mustExist,
	}
	// What q has read of the stored definition holds for its At handles
	// too (checked against the series' current definition at each use).
	at.hs.Store(q.hs.Load())
	return at
}

// NextAt is At(date).Next: the next number of the period holding date.
// The period must be open (else an error matching ErrPeriodClosed, a
// *PeriodClosedError, and nothing is taken); an earlier period still open
// takes back-dated documents after later periods have numbers.
func (q *Sequence) NextAt(ctx context.Context, date time.Time) (uint64, error) {
	t, date, def, err := q.beginAt(ctx, "next", date, true)
	if err != nil {
		return 0, err
	}
	n, err := t.do(op{kind: opNext, ctx: ctx, date: date, define: def, reason: q.reason()})
	return n, t.errorf("next", err)
}

// NextSerialAt is At(date).NextSerial.
func (q *Sequence) NextSerialAt(ctx context.Context, date time.Time) (Serial, error) {
	t, date, def, err := q.beginAt(ctx, "next", date, true)
	if err != nil {
		return Serial{}, err
	}
	n, err := t.do(op{kind: opNext, ctx: ctx, date: date, define: def, reason: q.reason()})
	if n == 0 {
		return Serial{}, t.errorf("next", err)
	}
	return t.serial(n, date), t.errorf("next", err)
}

// periodCache is the period a handle resolved last, by its compact id.
type periodCache struct {
	eff *effective
	id  int
	t   *Sequence
}

// resolve returns the target of q: the handle whose counter q's next call
// acts on, with the date its numbers are rendered for (zero: now).
func (q *Sequence) resolve(ctx context.Context) (*Sequence, time.Time, error) {
	return q.resolveAt(ctx, q.date, q.dated)
}

// resolveAt is resolve for a document dated date (when dated; else now).
func (q *Sequence) resolveAt(ctx context.Context, date time.Time, dated bool) (*Sequence, time.Time, error) {
	if q.target {
		return q, date, nil
	}
	hs, err := q.spec(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	return q.resolveWith(hs, date, dated)
}

// resolveWith is resolveAt with q's view of its series' definition, hs: it
// reads nothing.
func (q *Sequence) resolveWith(hs *handleSpec, date time.Time, dated bool) (*Sequence, time.Time, error) {
	if q.target {
		return q, date, nil
	}
	p := hs.eff.def.Period
	if p == PeriodNone {
		return q, date, nil
	}
	switch {
	case !dated:
		date = time.Now()
	case date.IsZero():
		// Rendering reads a zero date as now: it cannot choose year 1.
		return nil, time.Time{}, invalid("date", "0001-01-01 00:00:00 UTC", "the zero time.Time: a document date is needed to choose the period")
	}
	d := date.In(hs.eff.loc)
	id := periodID(p, hs.eff.def.FiscalStart, d)
	if pc := q.last.Load(); pc != nil && pc.id == id && pc.eff == hs.eff {
		return pc.t, date, nil
	}
	if !nameable(p, hs.eff.def.FiscalStart, d) {
		return nil, time.Time{}, invalid("date", date.String(), "a period of a year outside 0000 to 9999, which ClosePeriod could not name")
	}
	t, err := q.svc.periodTarget(q, hs, periodLabel(p, hs.eff.def.FiscalStart, d))
	if err != nil {
		return nil, time.Time{}, err
	}
	q.last.Store(&periodCache{eff: hs.eff, id: id, t: t})
	return t, date, nil
}

// nameable reports whether the period of kind p holding d's date has a
// label checkLabel accepts: its (first) year is 0000 to 9999.
func nameable(p Period, start MonthDay, d time.Time) bool {
	y := d.Year()
	if p == PeriodFiscalYear {
		y, _ = fiscalYear(start, d)
	}
	return y >= 0 && y <= 9999
}

// periodID names the period of kind p holding d's date as a number,
// cheaper to compare than its label.
func periodID(p Period, start MonthDay, d time.Time) int {
	y, m, day := d.Date()
	switch p {
	case PeriodDay:
		return y*10000 + int(m)*100 + day
	case PeriodMonth:
		return y*100 + int(m)
	case PeriodFiscalYear:
		first, _ := fiscalYear(start, d)
		return first
	}
	return y
}

// periodTarget returns the service's handle on the counter of period
// label of q's series and partition.
func (s *service) periodTarget(q *Sequence, hs *handleSpec, label string) (*Sequence, error) {
	partition := append(append(make([]string, 0, len(q.partition)+1), q.partition...), label)
	key, err := counterKey(s.prefix, q.series, partition)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.targets[key]; t != nil && t.hs.Load().eff == hs.eff {
		return t, nil
	}
	c, ok := s.counters[key]
	if !ok {
		c = newCounter(s, key, q.series, partition)
		s.counters[key] = c
	}
	c.periodic.Store(true)
	t := &Sequence{
		svc: s, c: c, sd: q.sd, series: q.series, partition: q.partition,
		def: q.def, defined: q.defined, loc: q.loc, tmpl: q.tmpl,
		target: true, period: label,
	}
	t.base = &Sequence{
		svc: s, c: q.c, sd: q.sd, series: q.series, partition: q.partition,
		def: q.def, defined: q.defined, loc: q.loc, tmpl: q.tmpl,
	}
	t.hs.Store(hs)
	s.targets[key] = t
	return t, nil
}

// ClosePeriod closes the period labelled period (as Serial.Period and
// SeriesInfo.Period name it: 2026-03-15, 2026-03, 2026, FY2025-26 or
// FY2026) of q's series and partition: afterwards no number can be taken
// into it (an error matching ErrPeriodClosed, and nothing taken), while
// other periods, earlier ones included, stay open. The close is recorded in
// the vault's ledger, with the period's last number, in the same commit as
// the counter's closed flag: a call racing it either took its number before
// the close or takes none. Closing a period that has no number yet works
// (its counter stays at 0); closing a closed period again is a no-op that
// returns nil, so an uncertain close can be retried.
//
// A label that is not a period of the series' kind, or a series without
// periods, gives a *ValidationError. It needs a store with atomic
// compare-and-swap (else ErrOffline).
func (q *Sequence) ClosePeriod(ctx context.Context, period string) error {
	if q.target {
		q = q.base
	}
	if err := q.allocating(ctx, "close period"); err != nil {
		return err
	}
	t, hs, err := q.labelled(ctx, period)
	if err != nil {
		return err
	}
	if err := t.definePending(ctx, hs); err != nil {
		return t.errorf("close period", err)
	}
	_, err = t.do(op{kind: opClose, ctx: ctx, define: hs.pending()})
	return t.errorf("close period", err)
}

// checkLabel checks that label names a period of kind p: the label of a
// date in it, written as periodLabel writes it.
func checkLabel(p Period, start MonthDay, label string) error {
	bad := invalid("period", label, "not a "+p.String()+" period label")
	num := func(s string) (int, bool) {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return 0, false
			}
		}
		n, err := strconv.Atoi(s)
		return n, err == nil && s != ""
	}
	var d time.Time
	switch p {
	case PeriodDay:
		if len(label) != 10 {
			return bad
		}
		t, err := time.Parse("2006-01-02", label)
		if err != nil {
			return bad
		}
		d = t
	case PeriodMonth:
		if len(label) != 7 {
			return bad
		}
		t, err := time.Parse("2006-01", label)
		if err != nil {
			return bad
		}
		d = t
	case PeriodYear:
		y, ok := num(label)
		if !ok || len(label) != 4 {
			return bad
		}
		d = time.Date(y, time.January, 1, 0, 0, 0, 0, time.UTC)
	case PeriodFiscalYear:
		if len(label) < 6 || label[:2] != "FY" {
			return bad
		}
		y, ok := num(label[2:6])
		if !ok {
			return bad
		}
		s := start.orJan1()
		d = time.Date(y, s.Month, s.Day, 0, 0, 0, 0, time.UTC)
	default:
		return bad
	}
	if periodLabel(p, start, d) != label {
		return bad
	}
	return nil
}

func init() {
	wire.SequenceCounterInfo = counterInfo
	wire.SequenceHead = func(plain []byte) (uint64, error) {
		st, err := decodeState(plain)
		return st.value, err
	}
	wire.SequenceRaise = raise
	wire.SequenceCounterKey = counterKey
}

// raise returns the counter value plain (nil: none yet) raised to to, or
// nil when it is there already (see wire.SequenceRaise).
func raise(plain []byte, to uint64) ([]byte, error) {
	var st state
	if plain != nil {
		var err error
		if st, err = decodeState(plain); err != nil {
			return nil, err
		}
	}
	if st.closed {
		return nil, fmt.Errorf("counter closed at %d: %w", st.value, ErrPeriodClosed)
	}
	if st.value >= to {
		return nil, nil
	}
	st.value = to
	return st.appendTo(nil), nil
}

// counterInfo describes q's own counter (see wire.SequenceCounterInfo).
func counterInfo(ctx context.Context, q *Sequence) (head uint64, period string, closed bool, def Definition, err error) {
	// The series' definition as stored, not q's view of it: a counter
	// whose partition the format does not fit is still listed.
	q.sd.mu.Lock()
	eff, err := q.loadSeries(ctx)
	q.sd.mu.Unlock()
	if err != nil {
		return 0, "", false, Definition{}, err
	}
	def = eff.def
	def.Meta = maps.Clone(def.Meta)
	st, err := q.peekState(ctx)
	if err != nil {
		return 0, "", false, Definition{}, err
	}
	if n := len(q.partition); def.Period != PeriodNone && n > 0 && checkLabel(def.Period, def.FiscalStart, q.partition[n-1]) == nil {
		period = q.partition[n-1]
	}
	return st.value, period, st.closed, def, nil
}

// labelled returns the handle of the counter of the period labelled
// period of q's series and partition, and q's spec: a series without
// periods, or a label that is not a period of the series' kind, gives a
// *ValidationError.
func (q *Sequence) labelled(ctx context.Context, period string) (*Sequence, *handleSpec, error) {
	hs, err := q.spec(ctx)
	if err != nil {
		return nil, nil, err
	}
	def := hs.eff.def
	if def.Period == PeriodNone {
		return nil, nil, invalid("period", period, fmt.Sprintf("series %q has no periods", q.series))
	}
	if err := checkLabel(def.Period, def.FiscalStart, period); err != nil {
		return nil, nil, err
	}
	t, err := q.svc.periodTarget(q, hs, period)
	if err != nil {
		return nil, nil, err
	}
	return t, hs, nil
}

// PeekPeriod returns the last number of the period labelled period of q's
// series and partition (0 when it has none) and whether it is closed. It
// never writes and works on every store; a label that is not a period of
// the series' kind, or a series without periods, gives a *ValidationError.
func (q *Sequence) PeekPeriod(ctx context.Context, period string) (head uint64, closed bool, err error) {
	if q.target {
		q = q.base
	}
	t, _, err := q.labelled(ctx, period)
	if err != nil {
		return 0, false, err
	}
	st, err := t.peekState(ctx)
	return st.value, st.closed, err
}

// SeedPeriod is SeedTo for the period labelled period (as Serial.Period and
// SeriesInfo.Period name it) of q's series and partition: it advances that
// period's counter to n if it is below n, so its next number is n+1, and
// never rewinds it. Where SeedTo chooses the period by the handle's date,
// SeedPeriod takes the label, as ClosePeriod and PeekPeriod do; a handle
// opened with the series' definition stores that definition in the seed's
// commit when the series has none stored yet (so a period is never seeded
// as a plain counter). A closed period gives ErrPeriodClosed, as SeedTo
// does. A label that is not a period of the series' kind, or a series
// without periods, gives a *ValidationError.
func (q *Sequence) SeedPeriod(ctx context.Context, period string, n uint64) error {
	if q.target {
		q = q.base
	}
	if err := q.allocating(ctx, "seed"); err != nil {
		return err
	}
	t, hs, err := q.labelled(ctx, period)
	if err != nil {
		return err
	}
	if err := t.definePending(ctx, hs); err != nil {
		return t.errorf("seed", err)
	}
	if n == 0 {
		return nil
	}
	_, err = t.do(op{kind: opSeed, ctx: ctx, target: n, define: hs.pending()})
	return t.errorf("seed", err)
}
