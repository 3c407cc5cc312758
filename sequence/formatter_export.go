package sequence

import "time"

// Formatter renders numbers through a parsed format template exactly as a
// Sequence with that format, partition, fiscal start, location and meta
// does, without a vault: use it to check a format before storing it with a
// series, or to show what numbers will look like. Deferred numbering
// (package numbering) renders its numbers with it. It is immutable and safe
// for concurrent use.
//
// The grammar is literal text with these tokens:
//
//	{seq}           the number in decimal
//	{seq:0N}        the number zero-padded to at least N digits, N in 1..20
//	                (wider numbers are not truncated)
//	{partition.i}   component i (decimal, from 0) of the partition tuple
//	{meta.<key>}    the value of key in the series' Meta
//	{YYYY}          the year of the document date, at least 4 digits
//	{YY}            that year modulo 100, 2 digits
//	{MM}            the month, 2 digits
//	{DD}            the day of the month, 2 digits
//	{DOY}           the day of the year, 3 digits (001 to 366)
//	{WW}            the ISO 8601 week, 2 digits (01 to 53)
//	{FY}            the fiscal year holding the date: 2026 when the fiscal
//	                year starts on 1 January, 2026-27 when it spans two
//	                calendar years
//	{FY_START}      the calendar year in which that fiscal year starts
//	{FY_END}        the calendar year in which that fiscal year ends
//	{TFY}           the fiscal year in two-digit form: 26, or 26-27
//
// Date tokens read the document date in the location, and the fiscal
// tokens count fiscal years from the fiscal start (FormatOptions). The ISO
// week belongs to the ISO year, which differs from the calendar year in the
// days around New Year: 31 December 2024 renders {YYYY}-W{WW} as 2024-W01,
// and 1 January 2021 as 2021-W53.
//
// Braces only delimit tokens and cannot be escaped. {partition.i} and
// {meta.<key>} are resolved when the template is parsed.
type Formatter struct {
	t     *template
	loc   *time.Location
	start MonthDay
}

// FormatOptions is what a template renders besides the number, as the
// fields of the same names in Options. The zero value is an unpartitioned
// series without meta, in UTC, with a fiscal year starting on 1 January.
type FormatOptions struct {
	// Partition is the partition tuple, as Options.Partition.
	Partition []any
	// FiscalStart is the first day of the fiscal year for {FY}, {FY_START},
	// {FY_END} and {TFY}; the zero value is 1 January. 29 February is
	// refused.
	FiscalStart MonthDay
	// Location is the time zone in which a document date is read; nil
	// means UTC.
	Location *time.Location
	// Meta holds the values of the {meta.<key>} tokens.
	Meta map[string]string
}

// ParseFormat parses format (see Formatter for the grammar) against the
// partition tuple (components as in Options.Partition; none for an
// unpartitioned series), for a series in UTC whose fiscal year starts on 1
// January and without meta (so a {meta.<key>} token needs
// ParseFormatWith). An empty, unknown or malformed template, or a
// {partition.i} outside the tuple, gives a *ValidationError.
func ParseFormat(format string, partition ...any) (*Formatter, error) {
	return ParseFormatWith(format, FormatOptions{Partition: partition})
}

// ParseFormatWith parses format (see Formatter for the grammar) for a
// series with the partition, fiscal start, location and meta of o. An
// empty, unknown or malformed template, a {partition.i} outside the tuple,
// a {meta.<key>} whose key o.Meta lacks or whose value is not valid UTF-8,
// holds a control character or is too long, a template that could render
// more than MaxFormattedLen bytes, or an invalid fiscal start gives a
// *ValidationError.
func ParseFormatWith(format string, o FormatOptions) (*Formatter, error) {
	parts, err := normalizePartition(o.Partition)
	if err != nil {
		return nil, err
	}
	if err := o.FiscalStart.check(); err != nil {
		return nil, err
	}
	t, err := parseFormat(format, parts, o.Meta)
	if err != nil {
		return nil, err
	}
	loc := o.Location
	if loc == nil {
		loc = time.UTC
	}
	return &Formatter{t: t, loc: loc, start: o.FiscalStart}, nil
}

// Dated reports whether the template has a date token ({YYYY}, {YY},
// {MM}, {DD}, {DOY}, {WW}, {FY}, {FY_START}, {FY_END} or {TFY}), so that
// what it renders depends on the document date.
func (f *Formatter) Dated() bool { return f.t.dated() }

// FormatAt renders n for a document dated date, read in the formatter's
// location (date may be in any location). A template without date tokens
// ignores date.
func (f *Formatter) FormatAt(n uint64, date time.Time) string {
	if !f.t.dated() {
		return f.t.format(n, time.Time{}, f.start)
	}
	return f.t.format(n, date.In(f.loc), f.start)
}

// Format renders n. A template with date tokens (see Dated) renders the
// current date, as Sequence.Next numbers by it: FormatAt(n, time.Now()).
// Use FormatAt to render a document's own date.
func (f *Formatter) Format(n uint64) string {
	if !f.t.dated() {
		return f.t.format(n, time.Time{}, f.start)
	}
	return f.FormatAt(n, time.Now())
}
