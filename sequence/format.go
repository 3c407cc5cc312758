package sequence

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxFormatLen is the longest format template, in bytes.
const MaxFormatLen = 256

// MaxFormattedLen is the longest a template may render a number, in bytes:
// a template whose literal text (partition and meta values included) and
// tokens at their widest could exceed it is refused when it is parsed.
const MaxFormattedLen = 1024

// maxWidth is the widest zero padding {seq:0N} accepts (a uint64 has at most 20 digits).
const maxWidth = 20

// maxYearLen bounds the decimal form of a year time.Time can hold (a sign
// and up to 19 digits), for the length bound of a template.
const maxYearLen = 20

// kind says what a piece of a template renders.
type kind uint8

const (
	kindLit     kind = iota // literal text (partition and meta values included)
	kindSeq                 // the number, zero-padded to width
	kindYear                // {YYYY}
	kindYear2               // {YY}
	kindMonth               // {MM}
	kindDay                 // {DD}
	kindDOY                 // {DOY}
	kindWeek                // {WW}
	kindFY                  // {FY}
	kindFYStart             // {FY_START}
	kindFYEnd               // {FY_END}
	kindTFY                 // {TFY}
)

// What a template needs from the date, computed once per rendering.
const (
	needDate   = 1 << iota // year, month, day
	needDOY                // day of the year
	needWeek               // ISO week
	needFiscal             // fiscal year (implies needDate)
)

// dateToken describes one date token: its kind, what it needs, its usual
// width (to size the buffer) and its widest rendering (for the bound).
type dateToken struct {
	kind       kind
	needs      uint8
	usual, max int
}

var dateTokens = map[string]dateToken{
	"YYYY":     {kindYear, needDate, 4, maxYearLen},
	"YY":       {kindYear2, needDate, 2, 2},
	"MM":       {kindMonth, needDate, 2, 2},
	"DD":       {kindDay, needDate, 2, 2},
	"DOY":      {kindDOY, needDOY, 3, 3},
	"WW":       {kindWeek, needWeek, 2, 2},
	"FY":       {kindFY, needDate | needFiscal, 7, maxYearLen + 3},
	"FY_START": {kindFYStart, needDate | needFiscal, 4, maxYearLen},
	"FY_END":   {kindFYEnd, needDate | needFiscal, 4, maxYearLen},
	"TFY":      {kindTFY, needDate | needFiscal, 5, 5},
}

// piece is one part of a parsed format: literal text (partition and meta
// tokens are substituted at parse time) followed by the number with a
// minimum width, by a date token, or (kindLit, at the end) by nothing.
type piece struct {
	lit   string
	kind  kind
	width int // of kindSeq
}

// template is a parsed format, specialised to one partition tuple and one
// set of meta values, so formatting a number is a loop over a few pieces.
type template struct {
	pieces []piece
	size   int   // bytes of literal text plus the usual width of the date tokens
	needs  uint8 // what the date tokens need from the date; 0: none

	// For a dated template: the template of the latest day it rendered.
	day atomic.Pointer[dayTemplate]
}

// parseFormat parses a format template against a partition tuple and the
// series' meta values.
//
// Grammar: literal text, with the tokens
//
//	{seq}           the number in decimal
//	{seq:0N}        the number zero-padded to at least N digits, N in 1..20
//	{partition.i}   component i (decimal, from 0) of the partition tuple
//	{meta.<key>}    the value of key in meta
//	{YYYY}          the year of the date, at least 4 digits
//	{YY}            the year of the date modulo 100, 2 digits
//	{MM}            the month of the date, 2 digits
//	{DD}            the day of the month of the date, 2 digits
//	{DOY}           the day of the year of the date, 3 digits (001 to 366)
//	{WW}            the ISO 8601 week of the date, 2 digits (01 to 53)
//	{FY}            the fiscal year holding the date: 2026 when it is one
//	                calendar year, 2026-27 when it spans two
//	{FY_START}      the calendar year in which that fiscal year starts
//	{FY_END}        the calendar year in which that fiscal year ends
//	{TFY}           the fiscal year in two-digit form: 26, or 26-27
//
// Date tokens render the date given to format, read in its location, and
// the fiscal tokens the fiscal year starting on the fiscal start given
// there. The ISO week belongs to the ISO year, which differs from the
// calendar year in the days around New Year: 31 December 2024 is week 01
// (of 2025) and 1 January 2021 is week 53 (of 2020).
//
// {partition.i} and {meta.<key>} are resolved here. A brace outside a token,
// an unknown token, an index outside the tuple, an empty or missing meta
// key, a meta value that is not valid UTF-8 or holds a control character,
// or a template that could render more than MaxFormattedLen bytes is a
// *ValidationError, as is a template without {seq}. Braces cannot be
// escaped: a literal brace cannot be written.
func parseFormat(f string, partition []string, meta map[string]string) (*template, error) {
	bad := func(reason string) error { return invalid("format", f, reason) }
	switch {
	case len(f) > MaxFormatLen:
		return nil, bad(fmt.Sprintf("longer than %d bytes", MaxFormatLen))
	case !utf8.ValidString(f):
		return nil, bad("not valid UTF-8")
	}
	t := &template{}
	var lit strings.Builder
	widest := 0 // the longest rendering of the tokens other than literal text
	usual := 0  // the part of t.size that counts date tokens
	// emit ends a piece: the literal text gathered so far, then a token
	// of kind k (kindLit: none).
	emit := func(k kind, width int) {
		t.pieces = append(t.pieces, piece{lit: lit.String(), kind: k, width: width})
		t.size += lit.Len()
		lit.Reset()
	}
	hasSeq := false
	for rest := f; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			lit.WriteString(rest)
			break
		}
		if rest[open] == '}' {
			return nil, bad(fmt.Sprintf("'}' at byte %d closes no token (braces only delimit tokens and cannot be escaped)", len(f)-len(rest)+open))
		}
		lit.WriteString(rest[:open])
		rest = rest[open+1:]
		end := strings.IndexAny(rest, "{}")
		if end < 0 || rest[end] == '{' {
			return nil, bad(fmt.Sprintf("'{' at byte %d opens no token (braces only delimit tokens and cannot be escaped)", len(f)-len(rest)-1))
		}
		token := rest[:end]
		rest = rest[end+1:]
		if d, ok := dateTokens[token]; ok {
			emit(d.kind, 0)
			t.needs |= d.needs
			t.size += d.usual
			usual += d.usual
			widest += d.max
			continue
		}
		switch {
		case token == "seq":
			emit(kindSeq, 0)
			widest += maxWidth
			hasSeq = true
		case strings.HasPrefix(token, "seq:"):
			w, ok := width(token[len("seq:"):])
			if !ok {
				return nil, bad(fmt.Sprintf("token {%s}: want {seq:0N} with N from 1 to %d", token, maxWidth))
			}
			emit(kindSeq, w)
			widest += maxWidth
			hasSeq = true
		case strings.HasPrefix(token, "partition."):
			i, ok := index(token[len("partition."):])
			if !ok || i >= len(partition) {
				return nil, bad(fmt.Sprintf("token {%s}: the partition has %d components", token, len(partition)))
			}
			lit.WriteString(partition[i])
		case strings.HasPrefix(token, "meta."):
			key := token[len("meta."):]
			v, err := metaValue(meta, key)
			if err != nil {
				return nil, bad(fmt.Sprintf("token {%s}: %s", token, err))
			}
			lit.WriteString(v)
		default:
			return nil, bad(fmt.Sprintf("unknown token {%s}", token))
		}
		if t.size-usual+lit.Len() > MaxFormattedLen {
			// Stop early: the bound below refuses it anyway.
			return nil, bad(fmt.Sprintf("could render more than %d bytes", MaxFormattedLen))
		}
	}
	if lit.Len() > 0 {
		emit(kindLit, 0)
	}
	if !hasSeq {
		return nil, bad("no {seq} token: every number would format the same")
	}
	if literal := t.size - usual; literal+widest > MaxFormattedLen {
		return nil, bad(fmt.Sprintf("could render %d bytes, more than %d", literal+widest, MaxFormattedLen))
	}
	return t, nil
}

// metaValue is the value of key in meta, checked for rendering.
func metaValue(meta map[string]string, key string) (string, error) {
	if key == "" {
		return "", errors.New("empty meta key")
	}
	v, ok := meta[key]
	if !ok {
		return "", fmt.Errorf("the series has no meta key %q", key)
	}
	if len(v) > MaxFormattedLen {
		return "", fmt.Errorf("the value of meta key %q is longer than %d bytes", key, MaxFormattedLen)
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("the value of meta key %q is not valid UTF-8", key)
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("the value of meta key %q holds a control character", key)
	}
	return v, nil
}

// width parses the "0N" of {seq:0N}.
func width(s string) (int, bool) {
	if len(s) < 2 || s[0] != '0' {
		return 0, false
	}
	n, ok := index(s[1:])
	if !ok || n < 1 || n > maxWidth {
		return 0, false
	}
	return n, true
}

// index parses a canonical small decimal: digits only, no leading zero.
func index(s string) (int, bool) {
	if s == "" || len(s) > 3 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// dated reports whether t has a date token, so its rendering depends on
// the date given to format.
func (t *template) dated() bool { return t.needs != 0 }

// dateFields are the values of the date tokens for one date.
type dateFields struct {
	year, day, doy, week, fyFirst, fyLast int
	month                                 time.Month
}

// fields computes what t's date tokens need from date.
func (t *template) fields(date time.Time, fiscalStart MonthDay) dateFields {
	var f dateFields
	if t.needs&(needDate|needFiscal) != 0 {
		f.year, f.month, f.day = date.Date()
		if t.needs&needFiscal != 0 {
			f.fyFirst, f.fyLast = fiscalYearOf(fiscalStart, f.year, f.month, f.day)
		}
	}
	if t.needs&needDOY != 0 {
		f.doy = date.YearDay()
	}
	if t.needs&needWeek != 0 {
		_, f.week = date.ISOWeek()
	}
	return f
}

// format renders n for a document dated date (read in date's location;
// the caller converts it to the series' location) in a series whose fiscal
// year starts on fiscalStart. Templates without date tokens ignore date
// and fiscalStart.
//
// A dated template keeps a copy of itself with the date tokens rendered
// for the latest day it rendered (see remember), so the numbers of that
// day, today's in the usual case, render as fast as with a template
// without date tokens; other dates are rendered token by token.
func (t *template) format(n uint64, date time.Time, fiscalStart MonthDay) string {
	if t.needs == 0 {
		return t.render(n, nil)
	}
	c := t.day.Load()
	if c != nil && c.plain != nil && c.loc == date.Location() && c.start == fiscalStart {
		if sec := date.Unix(); sec >= c.lo && sec < c.hi {
			return c.plain.render(n, nil)
		}
	}
	f := t.fields(date, fiscalStart)
	t.remember(c, date, fiscalStart, &f)
	return t.render(n, &f)
}

// render renders n with the date tokens of f (nil when t has none).
func (t *template) render(n uint64, f *dateFields) string {
	var digits [maxWidth]byte
	d := strconv.AppendUint(digits[:0], n, 10)
	// Most numbers fit the buffer on the stack, so the string is the one
	// allocation.
	var buf [96]byte
	b := buf[:0]
	if t.size+maxWidth > len(buf) {
		b = make([]byte, 0, t.size+len(t.pieces)*maxWidth)
	}
	for i := range t.pieces {
		p := &t.pieces[i]
		b = append(b, p.lit...)
		switch p.kind {
		case kindLit:
		case kindSeq:
			for i := len(d); i < p.width; i++ {
				b = append(b, '0')
			}
			b = append(b, d...)
		default:
			b = appendDate(b, p.kind, f)
		}
	}
	return string(b)
}

// appendDate appends the date token of kind k for the date of f.
func appendDate(b []byte, k kind, f *dateFields) []byte {
	switch k {
	case kindYear:
		b = appendYear(b, f.year)
	case kindYear2:
		b = append2(b, mod100(f.year))
	case kindMonth:
		b = append2(b, int(f.month))
	case kindDay:
		b = append2(b, f.day)
	case kindDOY:
		b = append(b, byte('0'+f.doy/100), byte('0'+f.doy/10%10), byte('0'+f.doy%10))
	case kindWeek:
		b = append2(b, f.week)
	case kindFY:
		b = appendFiscal(b, f.fyFirst, f.fyLast)
	case kindFYStart:
		b = appendYear(b, f.fyFirst)
	case kindFYEnd:
		b = appendYear(b, f.fyLast)
	case kindTFY:
		b = append2(b, mod100(f.fyFirst))
		if f.fyLast != f.fyFirst {
			b = append(b, '-')
			b = append2(b, mod100(f.fyLast))
		}
	}
	return b
}

// dayTemplate is a dated template with its date tokens rendered, as
// literal text, for one day of one location and fiscal start.
type dayTemplate struct {
	loc   *time.Location
	start MonthDay
	date  [3]int // year, month, day
	// plain renders the numbers of the day, which are the instants from
	// Unix second lo (included) to hi (excluded); nil when the day's UTC
	// offset changes (a DST change), for which t renders token by token.
	plain  *template
	lo, hi int64
}

// after reports whether the date y-m-d is after the day of c.
func (c *dayTemplate) after(y int, m time.Month, d int) bool {
	if y != c.date[0] {
		return y > c.date[0]
	}
	if int(m) != c.date[1] {
		return int(m) > c.date[1]
	}
	return d > c.date[2]
}

// remember replaces c, the day t keeps, with the day of date (whose date
// tokens are f) when t keeps none yet or date is later, in the same
// location with the same fiscal start: numbers are mostly taken for today,
// and a back-dated document leaves today's template in place. A day whose
// UTC offset changes (a DST change) is kept without a template: its
// instants are not one interval of 86400 seconds from a local midnight,
// and rendering it token by token is always right. Concurrent callers may
// replace each other's day: which day is kept changes only the speed.
func (t *template) remember(c *dayTemplate, date time.Time, fiscalStart MonthDay, f *dateFields) {
	loc := date.Location()
	if c != nil && (c.loc != loc || c.start != fiscalStart) {
		return
	}
	y, m, d := f.year, f.month, f.day
	if t.needs&(needDate|needFiscal) == 0 {
		y, m, d = date.Date()
	}
	if c != nil && !c.after(y, m, d) {
		return
	}
	next := &dayTemplate{loc: loc, start: fiscalStart, date: [3]int{y, int(m), d}}
	defer t.day.Store(next)
	lo := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ly, lm, ld := lo.Date(); ly != y || lm != m || ld != d {
		return
	}
	if hh, mm, ss := lo.Clock(); hh != 0 || mm != 0 || ss != 0 {
		return // midnight does not exist that day
	}
	hi := lo.Unix() + 24*60*60
	if _, end := lo.ZoneBounds(); !end.IsZero() && end.Unix() < hi {
		return // the offset changes during the day
	}
	plain := &template{}
	var lit []byte
	for _, p := range t.pieces {
		lit = append(lit, p.lit...)
		switch p.kind {
		case kindLit:
		case kindSeq:
			plain.pieces = append(plain.pieces, piece{lit: string(lit), kind: kindSeq, width: p.width})
			plain.size += len(lit)
			lit = lit[:0]
		default:
			lit = appendDate(lit, p.kind, f)
		}
	}
	if len(lit) > 0 {
		plain.pieces = append(plain.pieces, piece{lit: string(lit)})
		plain.size += len(lit)
	}
	next.plain, next.lo, next.hi = plain, lo.Unix(), hi
}

// append2 appends v, in 0..99, as two digits.
func append2(b []byte, v int) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}

// mod100 is y modulo 100, in 0..99 also for a negative year.
func mod100(y int) int { return (y%100 + 100) % 100 }

// appendYear appends y with at least 4 digits (after a sign when negative).
func appendYear(b []byte, y int) []byte {
	if y >= 0 && y < 10000 {
		return append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10))
	}
	u := uint64(y)
	if y < 0 {
		b = append(b, '-')
		u = -u
	}
	var digits [maxYearLen]byte
	d := strconv.AppendUint(digits[:0], u, 10)
	for i := len(d); i < 4; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

// appendFiscal appends the label of the fiscal year from first to last:
// 2026 when it is one calendar year, 2026-27 when it spans two.
func appendFiscal(b []byte, first, last int) []byte {
	b = appendYear(b, first)
	if last != first {
		b = append(b, '-')
		b = append2(b, mod100(last))
	}
	return b
}
