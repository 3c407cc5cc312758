package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// seqFlags are the flags that pick a counter, define its series (stored
// with the series by 'seq create' or its first number), name a period (by
// its label or a document date) and name the number a credit note
// corrects.
type seqFlags struct {
	partition string
	format    string

	// period is --period: a period kind (day, month, year, fiscal-year),
	// which defines the series, or the label of one period (2026-03-15,
	// 2026-03, 2026, FY2026-27), which names the period the command acts
	// on, as --date does. kinds and labels say which the command takes.
	period        string
	kinds, labels bool
	fiscalStart   string // MM-DD
	tz            string // IANA zone
	meta          []string
	corrects      string

	date string // the document's date: YYYY-MM-DD or RFC 3339

	// create is --new: a series (or collection) the vault has never seen
	// may be created (declare.go); mustExist makes the handle refuse a
	// series that does not exist (sequence.Options.MustExist).
	create, mustExist bool
	// creates: the command has --new, so it may create a series.
	creates bool

	// The number a credit note corrects: N, LABEL/N or as printed
	// (numref.go); --correcting-period and --correcting-partition.
	correcting          string
	correctingPeriod    string
	correctingPartition string
}

// add adds the flags every series command takes.
func (f *seqFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.partition, "partition", "", "partition tuple, comma-separated (e.g. 2026,EU): each tuple counts from 1")
	cmd.Flags().StringVar(&f.format, "format", "", "render numbers with a format (see 'noydb help formats'): {seq}, {seq:04}, {partition.0}, {FY}, … (stored with the series by its first number)")
}

// addDefine adds the flags that define a series, but --period (addPeriod).
func (f *seqFlags) addDefine(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.fiscalStart, "fiscal-start", "", "first day of the fiscal year, MM-DD (e.g. 04-01; stored with the series)")
	cmd.Flags().StringVar(&f.tz, "tz", "", "IANA time zone in which document dates are read (e.g. Europe/Rome; stored with the series; default UTC)")
	cmd.Flags().StringArrayVar(&f.meta, "meta", nil, "series metadata KEY=VALUE, for {meta.KEY} (repeatable; stored with the series)")
	cmd.Flags().StringVar(&f.corrects, "corrects", "", "this series corrects SERIES (credit notes): its numbers are taken only with --correcting (stored with the series)")
}

// addPeriod adds --period: a period kind when kinds (the command may
// define a series), a period's label when labels (what names the period
// the command acts on).
func (f *seqFlags) addPeriod(cmd *cobra.Command, kinds, labels bool, what string) {
	f.kinds, f.labels = kinds, labels
	var usage string
	switch {
	case kinds && labels:
		usage = "a period kind, day, month, year or fiscal-year, to restart the count each period of the document date (stored with the series); or the label of the period " + what + " (2026-03-15, 2026-03, 2026, FY2026-27, as 'seq list' shows them)"
	case kinds:
		usage = "restart the count each day, month, year or fiscal-year of the document date (stored with the series)"
	default:
		usage = "the period " + what + ", by its label: 2026-03-15, 2026-03, 2026 or FY2026-27, as 'seq list' shows them (default: today's)"
	}
	cmd.Flags().StringVar(&f.period, "period", "", usage)
}

// addDate adds --date.
func (f *seqFlags) addDate(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.date, "date", "", what+": YYYY-MM-DD (in the series' time zone) or RFC 3339; default today")
}

// addCorrecting adds the flags naming the number a credit note corrects.
func (f *seqFlags) addCorrecting(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.correcting, "correcting", "", "the number this number corrects (a series defined with --corrects): N, LABEL/N for a series with periods (FY2026-27/3), or the number as printed (FY2026-27/0003)")
	cmd.Flags().StringVar(&f.correctingPeriod, "correcting-period", "", "with --correcting N: the period label of the corrected number (e.g. FY2026-27); LABEL/N says it in one")
	cmd.Flags().StringVar(&f.correctingPartition, "correcting-partition", "", "with --correcting: the partition of the corrected number, comma-separated")
}

// periodKinds are the values of --period that define a series.
var periodKinds = []string{"day", "month", "year", "fiscal-year"}

// periodKind is --period when it is a period kind, else "".
func (f *seqFlags) periodKind() string {
	if slices.Contains(periodKinds, f.period) {
		return f.period
	}
	return ""
}

// periodLabel is --period when it names one period, else "".
func (f *seqFlags) periodLabel() string {
	if f.periodKind() != "" {
		return ""
	}
	return f.period
}

// looksLikeLabel tells a period label (it starts with a digit or FY) from
// a misspelt period kind.
func looksLikeLabel(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || strings.HasPrefix(s, "FY"))
}

// checkPeriod refuses a --period the command does not take, and --period
// LABEL with --date.
func (f *seqFlags) checkPeriod() error {
	kind, label := f.periodKind(), f.periodLabel()
	switch {
	case kind != "" && !f.kinds:
		return usagef("--period %q is a period kind, which 'seq create' (or the first number) stores with a series; here --period names one period by its label (2026-03-15, 2026-03, 2026, FY2026-27)", kind)
	case label != "" && !looksLikeLabel(label) && f.kinds:
		return usagef("--period %q: want day, month, year or fiscal-year (a period kind), or the label of one period (2026-03-15, 2026-03, 2026, FY2026-27)", label)
	case label != "" && !f.labels:
		return usagef("--period %q: want day, month, year or fiscal-year", label)
	case label != "" && f.date != "":
		return usagef("--period and --date both pick the period: give one")
	}
	return nil
}

// definesSeries reports whether a flag that defines a series (stored with
// it) was given: a series' first use with one creates it.
func (f *seqFlags) definesSeries() bool {
	return f.format != "" || f.periodKind() != "" || f.fiscalStart != "" || f.tz != "" || len(f.meta) > 0 || f.corrects != ""
}

// defines reports whether a definition, period or dating flag beyond
// --partition and --format was given.
func (f *seqFlags) defines() bool {
	return f.period != "" || f.fiscalStart != "" || f.tz != "" || len(f.meta) > 0 || f.corrects != "" ||
		f.date != "" || f.correcting != "" || f.correctingPeriod != "" || f.correctingPartition != ""
}

// parts splits --partition; integers and their decimal text are the same
// component to the sequence package, so every component is passed as text.
func (f *seqFlags) parts() []any {
	var out []any
	for _, p := range splitParts(f.partition) {
		out = append(out, p)
	}
	return out
}

func splitParts(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		out = append(out, strings.TrimSpace(p))
	}
	return out
}

// partStrings is parts as the text a listing of series shows.
func (f *seqFlags) partStrings() []string { return splitParts(f.partition) }

// options reads the flags into the options of a handle, refusing bad
// input (a period kind, fiscal start, zone or metadata) with a usage error.
func (f *seqFlags) options() (sequence.Options, error) {
	o := sequence.Options{Partition: f.parts(), Format: f.format, Corrects: f.corrects, MustExist: f.mustExist}
	if err := f.checkPeriod(); err != nil {
		return o, err
	}
	var err error
	if o.Period, err = sequence.ParsePeriod(f.periodKind()); err != nil {
		return o, usagef("--period %q: want day, month, year or fiscal-year", f.period)
	}
	if f.fiscalStart != "" {
		if o.FiscalStart, err = sequence.ParseMonthDay(f.fiscalStart); err != nil {
			return o, usagef("--fiscal-start %q: want MM-DD, a day of every year (not 02-29), like 04-01", f.fiscalStart)
		}
	}
	if f.tz != "" {
		if o.Location, err = loadZone(f.tz); err != nil {
			return o, err
		}
	}
	for _, kv := range f.meta {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return o, usagef("--meta %q: want KEY=VALUE", kv)
		}
		if o.Meta == nil {
			o.Meta = map[string]string{}
		}
		o.Meta[k] = v
	}
	if f.correcting == "" && (f.correctingPeriod != "" || f.correctingPartition != "") {
		return o, usagef("--correcting-period and --correcting-partition need --correcting")
	}
	if f.date != "" {
		if _, _, err := parseDate(f.date); err != nil {
			return o, err
		}
	}
	return o, nil
}

// loadZone loads an IANA zone, or gives a usage error.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" || name == "" {
		return nil, usagef("--tz %q: want an IANA zone name such as Europe/Rome", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, usagef("--tz %q: unknown time zone (want an IANA name such as Europe/Rome)", name)
	}
	return loc, nil
}

// parseDate reads --date: a calendar date (civil: read in the series'
// zone later) or an RFC 3339 instant.
func parseDate(s string) (t time.Time, civil bool, err error) {
	if d, err := time.Parse(time.DateOnly, s); err == nil && len(s) == len(time.DateOnly) {
		return d, true, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, false, nil
	}
	return time.Time{}, false, usagef("--date %q: want YYYY-MM-DD or RFC 3339 (2026-03-31T18:00:00+02:00)", s)
}

// seriesHandle is f.sequence after the check that the vault holds the
// series, unless the flags may create it (see requireSeries).
func (a *app) seriesHandle(ctx context.Context, f *seqFlags, v *vault.Vault, series string) (*sequence.Sequence, error) {
	if _, err := f.options(); err != nil {
		return nil, err
	}
	// A vault that takes no numbers here (a device used without its hub)
	// says so first.
	if _, err := v.Sequence(series, sequence.Options{}); err != nil {
		return nil, err
	}
	// A store that cannot take numbers says so first (sequence.ErrOffline):
	// that, not the name, is what the user must change.
	online := a.hub != nil || v.Store().Capabilities().CASAtomic
	f.mustExist = !f.mayCreate() && online && !a.created
	if err := a.requireSeries(ctx, v, series, !f.mustExist, f.creates); err != nil {
		return nil, err
	}
	return f.sequence(ctx, v, series)
}

// sequence opens the handle the flags name: checked flags first, then
// the series' handle, on the period --period LABEL names or dated with
// --date (a calendar date is midday of that date in the series' time
// zone), and for --correcting the handle of that correction.
func (f *seqFlags) sequence(ctx context.Context, v *vault.Vault, series string) (*sequence.Sequence, error) {
	o, err := f.options()
	if err != nil {
		return nil, err
	}
	s, err := v.Sequence(series, o)
	if err != nil {
		return nil, err
	}
	if label := f.periodLabel(); label != "" {
		if s, err = atLabel(ctx, s, label); err != nil {
			return nil, err
		}
	}
	if f.date != "" {
		d, civil, _ := parseDate(f.date)
		if civil {
			loc, err := seriesZone(ctx, s)
			if err != nil {
				return nil, err
			}
			d = time.Date(d.Year(), d.Month(), d.Day(), 12, 0, 0, 0, loc)
		}
		s = s.At(d)
	}
	if f.correcting != "" {
		ref, err := f.correctionRef(ctx, v, s)
		if err != nil {
			return nil, err
		}
		s = s.Correcting(ref)
	}
	return s, nil
}

// seriesZone is the time zone of s's series (UTC without one).
func seriesZone(ctx context.Context, s *sequence.Sequence) (*time.Location, error) {
	def, err := s.Definition(ctx)
	if err != nil {
		return nil, err
	}
	if def.Zone == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(def.Zone)
}

// atLabel returns the handle of s on the period labelled label: midday of
// its first day in the series' time zone. The label is checked first
// (PeekPeriod: a *ValidationError for a label of another kind).
func atLabel(ctx context.Context, s *sequence.Sequence, label string) (*sequence.Sequence, error) {
	if _, _, err := s.PeekPeriod(ctx, label); err != nil {
		return nil, err
	}
	def, err := s.Definition(ctx)
	if err != nil {
		return nil, err
	}
	loc, err := seriesZone(ctx, s)
	if err != nil {
		return nil, err
	}
	var d time.Time
	switch def.Period {
	case sequence.PeriodDay:
		d, err = time.Parse(time.DateOnly, label)
	case sequence.PeriodMonth:
		d, err = time.Parse("2006-01", label)
	case sequence.PeriodYear:
		d, err = time.Parse("2006", label)
	case sequence.PeriodFiscalYear:
		var y int
		y, err = strconv.Atoi(label[2:6]) // checked by PeekPeriod: FY and four digits
		start := def.FiscalStart
		if start == (sequence.MonthDay{}) {
			start = sequence.MonthDay{Month: time.January, Day: 1}
		}
		d = time.Date(y, start.Month, start.Day, 0, 0, 0, 0, time.UTC)
	}
	if err != nil {
		return nil, fmt.Errorf("period %q: %w", label, err)
	}
	return s.At(time.Date(d.Year(), d.Month(), d.Day(), 12, 0, 0, 0, loc)), nil
}
