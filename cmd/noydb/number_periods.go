package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// errClosedLeft: a pass left the records of a closed period pending.
var errClosedLeft = errors.New("records of a closed period were left pending")

// periodsOfSeries returns the stored definition of series when it counts
// per period (the zero Definition otherwise): a pass of it numbers each
// period's records on their own (vault.NumberingOfDated).
func periodsOfSeries(ctx context.Context, v *vault.Vault, series string) (sequence.Definition, error) {
	infos, err := v.SeriesNamed(ctx, series)
	if errors.Is(err, sequence.ErrOffline) {
		return sequence.Definition{}, nil
	}
	if err != nil {
		return sequence.Definition{}, err
	}
	for _, s := range infos {
		if s.Definition.Period != sequence.PeriodNone {
			return s.Definition, nil
		}
	}
	return sequence.Definition{}, nil
}

// datedHandle is the handle of a pass of series, which counts per period
// as def says, over collection coll: the records' dates are read from
// their JSON member dateField, which a format that renders dates needs
// (else a usage error); one that renders none needs no date, the period
// of each record being that of its handoff.
func (f *numberFlags) datedHandle(v *vault.Vault, coll, series string, def sequence.Definition) (*vault.Numbered[json.RawMessage], error) {
	loc, err := zoneOf(series, def)
	if err != nil {
		return nil, err
	}
	format := f.format
	if format == "" {
		format = def.Format
	}
	if format != "" && f.dateField == "" {
		fm, err := sequence.ParseFormatWith(format, sequence.FormatOptions{FiscalStart: def.FiscalStart, Location: loc})
		if err != nil {
			return nil, err
		}
		if fm.Dated() {
			return nil, usagef("series %q counts per %s and its format %q renders each record's own date: name the JSON member that holds it with --date-field",
				series, def.Period, format)
		}
	}
	opts := sequence.Options{Format: f.format, Period: def.Period, FiscalStart: def.FiscalStart, Location: loc}
	return vault.NumberingOfDated(records(v, coll), series, opts, setJSONField(f.field), jsonDate(f.dateField, loc))
}

// zoneOf is the time zone of series' definition def.
func zoneOf(series string, def sequence.Definition) (*time.Location, error) {
	if def.Zone == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(def.Zone)
	if err != nil {
		return nil, fmt.Errorf("series %q: its zone: %w", series, err)
	}
	return loc, nil
}

// linesHandle is the handle 'number status', 'lookup' and 'enqueue' read
// series name's lines of records through, and whether the series counts
// per period: then each period has a line of its own
// (vault.Numbered.Periods, SeriesOf), the records' dates read from their
// JSON member --date-field (which only enqueue needs).
func (f *numberFlags) linesHandle(ctx context.Context, v *vault.Vault, name string) (*vault.Numbered[json.RawMessage], bool, error) {
	return f.periodsHandle(ctx, v, name, f.linesOfPeriods)
}

// linesOfPeriods is linesHandle's handle of a series that counts per
// period as def says, over collection coll.
func (f *numberFlags) linesOfPeriods(v *vault.Vault, coll, series string, def sequence.Definition) (*vault.Numbered[json.RawMessage], error) {
	loc, err := zoneOf(series, def)
	if err != nil {
		return nil, err
	}
	opts := sequence.Options{Period: def.Period, FiscalStart: def.FiscalStart, Location: loc}
	return vault.NumberingOfDated(records(v, coll), series, opts, setJSONField(f.field), jsonDate(f.dateField, loc))
}

// jsonDate returns the date getter of a record whose JSON member field
// (matched exactly, else case-insensitively, as encoding/json decodes)
// holds its date: RFC 3339 text (a time.Time's JSON), or YYYY-MM-DD in
// loc. A record without it, or without a date there, has the zero time,
// which a format rendering dates refuses.
func jsonDate(field string, loc *time.Location) func(*json.RawMessage) time.Time {
	return func(r *json.RawMessage) time.Time {
		if field == "" {
			return time.Time{}
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(*r, &obj) != nil {
			return time.Time{}
		}
		raw, ok := obj[field]
		if !ok {
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				if strings.EqualFold(k, field) {
					raw, ok = obj[k], true
					break
				}
			}
		}
		var text string
		if !ok || json.Unmarshal(raw, &text) != nil {
			return time.Time{}
		}
		if t, err := time.Parse(time.RFC3339Nano, text); err == nil {
			return t
		}
		if t, err := time.ParseInLocation(time.DateOnly, text, loc); err == nil {
			return t
		}
		return time.Time{}
	}
}

// passJSON is what a pass did, as 'number pass --json' prints it.
type passJSON struct {
	Batch    uint64 `json:"batch"`
	First    uint64 `json:"first"`
	Last     uint64 `json:"last"`
	Assigned int    `json:"assigned"`
	Voided   int    `json:"voided"`
	Resumed  int    `json:"resumed"`
	Skipped  int    `json:"skipped"`
	Waiting  int    `json:"waiting"`
}

func passJSONOf(r numbering.PassReport) passJSON {
	return passJSON{r.Batch, r.First, r.Last, r.Assigned, r.Voided, r.Resumed, r.Skipped, r.Waiting}
}

// periodPassJSON is the pass of one period as 'number pass --json' prints it.
type periodPassJSON struct {
	Period string `json:"period"`
	passJSON
	Closed int    `json:"closed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// closedLeft is the error of a pass that left records of closed periods
// pending (nil when it left none): it matches sequence.ErrPeriodClosed
// and errClosedLeft, and names each period.
func closedLeft(rep numbering.PassReport) error {
	var errs []error
	for _, p := range rep.Periods {
		if errors.Is(p.Err, sequence.ErrPeriodClosed) {
			errs = append(errs, p.Err)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", errClosedLeft, errors.Join(errs...))
}

// printPass prints what one pass did, under the name what.
func (a *app) printPass(what string, rep numbering.PassReport) {
	switch {
	case rep.Batch == 0 && rep.Resumed == 0:
		fmt.Fprintf(a.io.out, "%s: nothing to number", what)
	case rep.Batch == 0:
		fmt.Fprintf(a.io.out, "%s: finished an interrupted batch", what)
	default:
		fmt.Fprintf(a.io.out, "%s: batch %d gave numbers %d to %d", what, rep.Batch, rep.First, rep.Last)
	}
	fmt.Fprintf(a.io.out, " (%d stamped, %d voided, %d resumed, %d skipped)\n", rep.Assigned, rep.Voided, rep.Resumed, rep.Skipped)
	if rep.Waiting > 0 {
		fmt.Fprintf(a.io.out, "%d handed-off records are not in the store (yet): they wait for a later pass\n", rep.Waiting)
	}
}

// printPeriodPasses prints the pass of a series with periods, one period
// after the other, and returns closedLeft's error.
func (a *app) printPeriodPasses(series string, rep numbering.PassReport) error {
	left := closedLeft(rep)
	if a.json {
		out := make([]periodPassJSON, 0, len(rep.Periods))
		for _, p := range rep.Periods {
			j := periodPassJSON{Period: p.Period, passJSON: passJSONOf(p.Report), Closed: p.Report.Closed}
			if p.Err != nil {
				j.Error = p.Err.Error()
			}
			out = append(out, j)
		}
		if err := a.printJSON(struct {
			Series  string           `json:"series"`
			Periods []periodPassJSON `json:"periods"`
		}{series, out}); err != nil {
			return err
		}
		return left
	}
	if len(rep.Periods) == 0 {
		fmt.Fprintf(a.io.out, "series %q: no period has records waiting\n", series)
	}
	for _, p := range rep.Periods {
		what := fmt.Sprintf("series %q period %s", series, p.Period)
		if errors.Is(p.Err, sequence.ErrPeriodClosed) {
			fmt.Fprintf(a.io.out, "%s: closed: %d records wait and take no number there\n", what, p.Report.Closed)
			continue
		}
		a.printPass(what, p.Report)
	}
	return left
}

// datedFormat reports whether format has date tokens: a record handed off
// through vault.NumberingOf cannot carry it (the handle has no document
// date to render), so 'put --seq' numbers it at write time.
func datedFormat(format string) bool {
	if format == "" {
		return false
	}
	f, err := sequence.ParseFormatWith(format, sequence.FormatOptions{})
	return err == nil && f.Dated()
}

// lookupLines looks record id up in the series of h: in each period's
// line for a series that counts per period, else in its own.
func lookupLines(ctx context.Context, h *vault.Numbered[json.RawMessage], id string) (numbering.Assignment, bool, error) {
	periods, err := h.Periods(ctx)
	if err != nil {
		return numbering.Assignment{}, false, err
	}
	if periods == nil {
		return h.Series().Lookup(ctx, id)
	}
	for _, p := range periods {
		as, ok, err := p.Series.Lookup(ctx, id)
		if err != nil || ok {
			return as, ok, err
		}
	}
	return numbering.Assignment{}, false, nil
}

// statusBatchJSON is a batch in flight, as 'number status --json' prints it.
type statusBatchJSON struct {
	First     uint64 `json:"first"`
	Last      uint64 `json:"last"`
	Done      uint64 `json:"done"`
	Unstamped int    `json:"unstamped"`
}

// printPeriodStatus prints 'number status' of a series that counts per
// period: one line per period that had records handed off (its last
// number, its pending records, a batch a pass left in flight).
func (a *app) printPeriodStatus(ctx context.Context, series string, h *vault.Numbered[json.RawMessage]) error {
	periods, err := h.Periods(ctx)
	if err != nil {
		return err
	}
	type periodJSON struct {
		Period  string           `json:"period"`
		Last    uint64           `json:"last"`
		Pending int              `json:"pending"`
		Batch   *statusBatchJSON `json:"batch,omitempty"`
	}
	out := make([]periodJSON, 0, len(periods))
	for _, p := range periods {
		st, err := p.Series.Status(ctx)
		if err != nil {
			return fmt.Errorf("period %s: %w", p.Period, err)
		}
		j := periodJSON{Period: p.Period, Last: st.Last, Pending: st.Waiting}
		if b := st.Batch; b != nil {
			j.Batch = &statusBatchJSON{b.First, b.Last, b.Done, b.Unstamped}
		}
		out = append(out, j)
	}
	if a.json {
		return a.printJSON(struct {
			Series  string       `json:"series"`
			Periods []periodJSON `json:"periods"`
		}{series, out})
	}
	if len(out) == 0 {
		_, err := fmt.Fprintf(a.io.out, "series %q: no period has records handed off\n", series)
		return err
	}
	for _, p := range out {
		if _, err := fmt.Fprintf(a.io.out, "series %q period %s: last number %d, %d pending\n", series, p.Period, p.Last, p.Pending); err != nil {
			return err
		}
		if b := p.Batch; b != nil {
			if _, err := fmt.Fprintf(a.io.out, "a pass stopped in the batch of numbers %d-%d of period %s: %d of its records do not carry their numbers yet; 'noydb number pass %s' finishes them\n",
				b.First, b.Last, p.Period, b.Unstamped, series); err != nil {
				return err
			}
		}
	}
	return nil
}
