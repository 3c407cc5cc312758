package sequence

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reference below computes every date token by other means than the
// code: the calendar date from Time.Format, the day of the year by counting
// days from 1 January, the ISO week from its definition (week 1 is the
// week, Monday to Sunday, holding the year's first Thursday) and the fiscal
// year by comparing the date with the fiscal starts around it.

// refCivil is the calendar date of at in its location, read from its text.
func refCivil(at time.Time) (int, time.Month, int) {
	num := func(layout string) int {
		n, err := strconv.Atoi(at.Format(layout))
		if err != nil {
			panic(err)
		}
		return n
	}
	return num("2006"), time.Month(num("01")), num("02")
}

// midnight is the date y-m-d at 00:00 UTC, a day that is always 24 hours.
func midnight(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// refDayOfYear counts the days from 1 January to the date.
func refDayOfYear(y int, m time.Month, d int) int {
	n := 1
	for c, day := midnight(y, time.January, 1), midnight(y, m, d); c.Before(day); c = c.AddDate(0, 0, 1) {
		n++
	}
	return n
}

// refISOWeek finds the ISO year whose week 1 starts on or before the date
// and counts the weeks from that Monday.
func refISOWeek(y int, m time.Month, d int) (year, week int) {
	day := midnight(y, m, d)
	for year = y + 1; ; year-- {
		thursday := midnight(year, time.January, 1)
		for thursday.Weekday() != time.Thursday {
			thursday = thursday.AddDate(0, 0, 1)
		}
		monday := thursday.AddDate(0, 0, -3)
		if !day.Before(monday) {
			return year, int(day.Sub(monday)/(24*time.Hour))/7 + 1
		}
	}
}

// refFiscal finds the fiscal year holding the date: the one whose first
// day is on or before it and whose successor's first day is after it, and
// the calendar year of its last day.
func refFiscal(start MonthDay, y int, m time.Month, d int) (first, last int) {
	sm, sd := start.Month, start.Day
	if start == (MonthDay{}) {
		sm, sd = time.January, 1
	}
	day := midnight(y, m, d)
	for first = y; midnight(first, sm, sd).After(day); first-- {
	}
	return first, midnight(first+1, sm, sd).AddDate(0, 0, -1).Year()
}

// refTokens renders every date token of at with the fiscal start.
func refTokens(at time.Time, start MonthDay) map[string]string {
	y, m, d := refCivil(at)
	_, w := refISOWeek(y, m, d)
	first, last := refFiscal(start, y, m, d)
	two := func(n int) string { return fmt.Sprintf("%02d", n%100) }
	fy, tfy := strconv.Itoa(first), two(first)
	if last != first {
		fy += "-" + two(last)
		tfy += "-" + two(last)
	}
	return map[string]string{
		"{YYYY}":     strconv.Itoa(y),
		"{YY}":       two(y),
		"{MM}":       two(int(m)),
		"{DD}":       two(d),
		"{DOY}":      fmt.Sprintf("%03d", refDayOfYear(y, m, d)),
		"{WW}":       two(w),
		"{FY}":       fy,
		"{FY_START}": strconv.Itoa(first),
		"{FY_END}":   strconv.Itoa(last),
		"{TFY}":      tfy,
	}
}

var propertyZones = []string{
	"UTC", "Europe/Rome", "America/New_York", "Australia/Sydney", "America/Santiago", "Asia/Kolkata",
	"Pacific/Chatham", "Pacific/Kiritimati", "Pacific/Pago_Pago", "America/St_Johns", "Europe/London",
}

// randomStart is a fiscal start on any day that every year has, or the
// zero value.
func randomStart(rng *rand.Rand) MonthDay {
	if rng.IntN(8) == 0 {
		return MonthDay{}
	}
	m := time.Month(1 + rng.IntN(12))
	days := time.Date(2001, m+1, 0, 0, 0, 0, 0, time.UTC).Day() // 2001: February has 28
	return MonthDay{Month: m, Day: 1 + rng.IntN(days)}
}

// fresh parses format into a template that has kept no day.
func fresh(t *testing.T, format string, partition []string, meta map[string]string) *template {
	t.Helper()
	tmpl, err := parseFormat(format, partition, meta)
	require.NoError(t, err)
	return tmpl
}

func TestFormatTokensMatchReference(t *testing.T) {
	iterations := 20000
	if testing.Short() {
		iterations = 2000
	}
	zones := make([]*time.Location, len(propertyZones))
	for i, name := range propertyZones {
		zones[i] = loadLocation(t, name)
	}
	dateTokens := []string{"{YYYY}", "{YY}", "{MM}", "{DD}", "{DOY}", "{WW}", "{FY}", "{FY_START}", "{FY_END}", "{TFY}"}
	literals := []string{"-", "/", "FY", " ", "№", "x.", ""}
	lo, hi := midnight(1900, time.January, 1).Unix(), midnight(2201, time.January, 1).Unix()
	rng := rand.New(rand.NewPCG(14, 2026))
	for i := range iterations {
		loc := zones[rng.IntN(len(zones))]
		at := time.Unix(lo+rng.Int64N(hi-lo), 0).In(loc)
		start := randomStart(rng)
		meta := map[string]string{"code": fmt.Sprintf("AT%d", rng.IntN(1000))}
		partition := []string{strconv.Itoa(1900 + rng.IntN(300))}
		n := rng.Uint64N(1_000_000)
		ref := refTokens(at, start)
		ref["{meta.code}"] = meta["code"]
		ref["{partition.0}"] = partition[0]
		ref["{seq}"] = strconv.FormatUint(n, 10)
		ref["{seq:05}"] = fmt.Sprintf("%05d", n)

		// A template of 1 to 12 tokens and literals, with every date token
		// in some iterations and a number always.
		var format, want strings.Builder
		add := func(token string) {
			format.WriteString(token)
			want.WriteString(ref[token])
		}
		addLit := func(lit string) {
			format.WriteString(lit)
			want.WriteString(lit)
		}
		if i%10 == 0 {
			for _, tok := range dateTokens {
				add(tok)
				addLit(literals[rng.IntN(len(literals))])
			}
		}
		for range 1 + rng.IntN(12) {
			switch rng.IntN(3) {
			case 0:
				addLit(literals[rng.IntN(len(literals))])
			case 1:
				add(dateTokens[rng.IntN(len(dateTokens))])
			default:
				add([]string{"{meta.code}", "{partition.0}", "{seq}", "{seq:05}"}[rng.IntN(4)])
			}
		}
		add([]string{"{seq}", "{seq:05}"}[rng.IntN(2)])

		tmpl, err := parseFormat(format.String(), partition, meta)
		require.NoError(t, err, format.String())
		ctx := fmt.Sprintf("iteration %d: %q at %s, fiscal start %v", i, format.String(), at.Format(time.RFC3339+" MST"), start)
		if !assert.Equal(t, want.String(), tmpl.format(n, at, start), ctx) {
			return
		}
		// A second rendering of the day comes from the day's template the
		// first one kept (unless the day has a DST change); so does an
		// instant up to an hour away when it is the same day.
		if !assert.Equal(t, want.String(), tmpl.format(n, at, start), "from the day's template: "+ctx) {
			return
		}
		near := at.Add(time.Duration(rng.IntN(7200)-3600) * time.Second)
		if !assert.Equal(t, tmpl.format(n, near, start), tmpl.format(n, near, start), "near: "+ctx) {
			return
		}
		if f := fresh(t, format.String(), partition, meta); !assert.Equal(t, f.format(n, near, start), tmpl.format(n, near, start), "near, fresh: "+ctx) {
			return
		}
		f, err := ParseFormatWith(format.String(), FormatOptions{Partition: []any{partition[0]}, Meta: meta, FiscalStart: start, Location: loc})
		require.NoError(t, err)
		if !assert.Equal(t, want.String(), f.FormatAt(n, at.UTC()), "Formatter: "+ctx) {
			return
		}
		// The periods name the same dates as the tokens.
		y, m, d := refCivil(at)
		day := fmt.Sprintf("%04d-%02d-%02d", y, int(m), d)
		if !assert.Equal(t, day, periodLabel(PeriodDay, start, at), ctx) ||
			!assert.Equal(t, day[:7], periodLabel(PeriodMonth, start, at), ctx) ||
			!assert.Equal(t, day[:4], periodLabel(PeriodYear, start, at), ctx) ||
			!assert.Equal(t, "FY"+ref["{FY}"], periodLabel(PeriodFiscalYear, start, at), ctx) {
			return
		}
	}
}
