package sequence

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Period says how often a series' count restarts, by the date of the
// document a number is taken for (see Options.Period).
type Period uint8

// Periods.
const (
	// PeriodNone: one count, never restarted (the default).
	PeriodNone Period = iota
	// PeriodDay: a count per calendar day.
	PeriodDay
	// PeriodMonth: a count per calendar month.
	PeriodMonth
	// PeriodYear: a count per calendar year.
	PeriodYear
	// PeriodFiscalYear: a count per fiscal year, which starts on
	// Options.FiscalStart.
	PeriodFiscalYear
)

var periodNames = [...]string{"none", "day", "month", "year", "fiscal-year"}

// String names p as ParsePeriod reads it: none, day, month, year, fiscal-year.
func (p Period) String() string {
	if int(p) < len(periodNames) {
		return periodNames[p]
	}
	return "Period(" + strconv.Itoa(int(p)) + ")"
}

// valid reports whether p is one of the declared periods.
func (p Period) valid() bool { return int(p) < len(periodNames) }

// ParsePeriod reads a period name as String writes it ("" is none). Other
// text is a *ValidationError.
func ParsePeriod(s string) (Period, error) {
	if s == "" {
		return PeriodNone, nil
	}
	for i, n := range periodNames {
		if s == n {
			return Period(i), nil
		}
	}
	return 0, invalid("period", s, "want none, day, month, year or fiscal-year")
}

// MonthDay is a day of the year without a year: the first day of a fiscal
// year. The zero value means 1 January.
type MonthDay struct {
	Month time.Month
	Day   int
}

// orJan1 is md, with the zero value read as 1 January.
func (md MonthDay) orJan1() MonthDay {
	if md == (MonthDay{}) {
		return MonthDay{Month: time.January, Day: 1}
	}
	return md
}

// String writes md as MM-DD (01-01 for the zero value).
func (md MonthDay) String() string {
	md = md.orJan1()
	return fmt.Sprintf("%02d-%02d", int(md.Month), md.Day)
}

// check validates md as the start of a fiscal year: a real day of every
// year, so 29 February is refused.
func (md MonthDay) check() error {
	if md == (MonthDay{}) {
		return nil
	}
	if md.Month < time.January || md.Month > time.December {
		return invalid("fiscal start", md.rawString(), "month not in 1..12")
	}
	// Day 0 of the next month is the last day of this one; 2001 is not a
	// leap year, so February has 28 days here.
	last := time.Date(2001, md.Month+1, 0, 0, 0, 0, 0, time.UTC).Day()
	if md.Day < 1 || md.Day > last {
		return invalid("fiscal start", md.rawString(), fmt.Sprintf("day not in 1..%d of every year", last))
	}
	return nil
}

func (md MonthDay) rawString() string { return fmt.Sprintf("%02d-%02d", int(md.Month), md.Day) }

// ParseMonthDay reads MM-DD (or M-D), as MonthDay.String writes it. A day
// that is not in every year (29 February) or text of another shape is a
// *ValidationError.
func ParseMonthDay(s string) (MonthDay, error) {
	m, d, ok := strings.Cut(s, "-")
	mi, err1 := strconv.Atoi(m)
	di, err2 := strconv.Atoi(d)
	if !ok || err1 != nil || err2 != nil || strings.HasPrefix(m, "+") || strings.HasPrefix(d, "+") {
		return MonthDay{}, invalid("fiscal start", s, "want MM-DD, like 04-01")
	}
	md := MonthDay{Month: time.Month(mi), Day: di}
	if err := md.check(); err != nil {
		return MonthDay{}, err
	}
	return md, nil
}

// fiscalYear returns the calendar years in which the fiscal year holding
// the date of t (read in t's location) starts and ends. They are equal for
// a fiscal year starting on 1 January.
func fiscalYear(start MonthDay, t time.Time) (first, last int) {
	y, m, d := t.Date()
	return fiscalYearOf(start, y, m, d)
}

// fiscalYearOf is fiscalYear for the date y-m-d.
func fiscalYearOf(start MonthDay, y int, m time.Month, d int) (first, last int) {
	start = start.orJan1()
	first = y
	if m < start.Month || (m == start.Month && d < start.Day) {
		first = y - 1
	}
	last = first
	if start != (MonthDay{Month: time.January, Day: 1}) {
		last = first + 1
	}
	return first, last
}

// fiscalLabel names the fiscal year from first to last: 2026 when it is one
// calendar year, 2026-27 when it spans two (the year with at least 4
// digits, as {YYYY} and the year period write it). The {FY} token renders
// the same text.
func fiscalLabel(first, last int) string {
	var b [2*maxYearLen + 1]byte
	return string(appendFiscal(b[:0], first, last))
}

// periodLabel names the period of kind p holding the date of t (read in
// t's location): 2026-03-15 (day), 2026-03 (month), 2026 (year), FY2026-27
// or FY2026 (fiscal year). It is the partition component a periodic
// series counts under, and what ClosePeriod names. PeriodNone has no label.
func periodLabel(p Period, start MonthDay, t time.Time) string {
	if p == PeriodNone || !p.valid() {
		return ""
	}
	y, m, d := t.Date()
	var buf [2*maxYearLen + 3]byte
	b := buf[:0]
	switch p {
	case PeriodDay:
		b = append(appendYear(b, y), '-', byte('0'+m/10), byte('0'+m%10), '-')
		b = append2(b, d)
	case PeriodMonth:
		b = append(appendYear(b, y), '-', byte('0'+m/10), byte('0'+m%10))
	case PeriodYear:
		b = appendYear(b, y)
	case PeriodFiscalYear:
		first, last := fiscalYearOf(start, y, m, d)
		b = appendFiscal(append(b, "FY"...), first, last)
	}
	return string(b)
}

// Label names the period of kind p that holds the day of date, read in
// date's location (call date.In(zone) first for a series' zone), as
// Serial.Period and ClosePeriod name it: 2026-03-15 (day), 2026-03
// (month), 2026 (year), FY2026-27 or FY2026 (fiscal year, starting on
// fiscalStart; the zero MonthDay is 1 January). PeriodNone, and a period
// kind that is not declared, have no label ("").
func (p Period) Label(date time.Time, fiscalStart MonthDay) string {
	return periodLabel(p, fiscalStart, date)
}
