package sequence

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// edgeLine renders every date token of a document date; the expected
// values in the tests below come from the calendar (GNU date's %j and %V
// agree with them), not from the code.
const edgeLine = "{YYYY}-{MM}-{DD} {YY} d{DOY} w{WW} {FY} {FY_START}..{FY_END} {TFY} #{seq}"

// edge is a document date, already in the series' location, and what
// edgeLine renders for it ("2026-03-29 26 d088 w13 2026 2026..2026 26").
type edge struct {
	what  string
	at    time.Time
	start MonthDay
	want  string
}

func loadLocation(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err, "time zone data for %s", name)
	return loc
}

var (
	april1 = MonthDay{Month: time.April, Day: 1}
	july1  = MonthDay{Month: time.July, Day: 1}
)

// checkEdges checks, for each edge, the tokens and the period labels: the
// day, month, year and fiscal-year periods must name the same date as the
// tokens.
func checkEdges(t *testing.T, edges []edge) {
	t.Helper()
	tmpl, err := parseFormat(edgeLine, nil, nil)
	require.NoError(t, err)
	for _, e := range edges {
		at := e.at.Format(time.RFC3339 + " MST")
		assert.Equal(t, e.want+" #1", tmpl.format(1, e.at, e.start), "%s: tokens at %s", e.what, at)
		fy := strings.Fields(e.want)[4]
		assert.Equal(t, e.want[:10], periodLabel(PeriodDay, e.start, e.at), "%s: day at %s", e.what, at)
		assert.Equal(t, e.want[:7], periodLabel(PeriodMonth, e.start, e.at), "%s: month at %s", e.what, at)
		assert.Equal(t, e.want[:4], periodLabel(PeriodYear, e.start, e.at), "%s: year at %s", e.what, at)
		assert.Equal(t, "FY"+fy, periodLabel(PeriodFiscalYear, e.start, e.at), "%s: fiscal year at %s", e.what, at)
		first, last := fiscalYear(e.start, e.at)
		assert.Equal(t, fy, fiscalLabel(first, last), "%s: fiscal label at %s", e.what, at)
		// The same from the day's template, which a fresh template
		// keeps after its first rendering (unless the day has a DST
		// change).
		fresh, err := parseFormat(edgeLine, nil, nil)
		require.NoError(t, err)
		assert.Equal(t, e.want+" #2", fresh.format(2, e.at, e.start), "%s: first rendering at %s", e.what, at)
		assert.Equal(t, e.want+" #3", fresh.format(3, e.at, e.start), "%s: from the day's template at %s", e.what, at)
	}
}

func utc(y int, m time.Month, d, hh, mm, ss int) time.Time {
	return time.Date(y, m, d, hh, mm, ss, 0, time.UTC)
}

func TestEdgeNewYearRomeVsUTC(t *testing.T) {
	rome := loadLocation(t, "Europe/Rome")
	at := utc(2025, time.December, 31, 23, 30, 0) // 00:30 on 1 January in Rome
	checkEdges(t, []edge{
		{"UTC", at, MonthDay{}, "2025-12-31 25 d365 w01 2025 2025..2025 25"},
		{"Rome", at.In(rome), MonthDay{}, "2026-01-01 26 d001 w01 2026 2026..2026 26"},
		{"UTC, fiscal 1 April", at, april1, "2025-12-31 25 d365 w01 2025-26 2025..2026 25-26"},
		{"Rome, fiscal 1 April", at.In(rome), april1, "2026-01-01 26 d001 w01 2025-26 2025..2026 25-26"},
		{"Rome, one second before", utc(2025, time.December, 31, 22, 59, 59).In(rome), MonthDay{}, "2025-12-31 25 d365 w01 2025 2025..2025 25"},
	})
	// A Formatter reads a date given in any location in its own.
	f, err := ParseFormatWith(edgeLine, FormatOptions{Location: rome})
	require.NoError(t, err)
	assert.Equal(t, "2026-01-01 26 d001 w01 2026 2026..2026 26 #1", f.FormatAt(1, at))
	f, err = ParseFormatWith(edgeLine, FormatOptions{})
	require.NoError(t, err)
	assert.Equal(t, "2025-12-31 25 d365 w01 2025 2025..2025 25 #1", f.FormatAt(1, at.In(rome)), "nil Location is UTC")
}

func TestEdgeDSTRome(t *testing.T) {
	rome := loadLocation(t, "Europe/Rome")
	// 29 March 2026: 02:00 CET jumps to 03:00 CEST. 25 October 2026: 03:00
	// CEST falls back to 02:00 CET, so 02:30 happens twice.
	early, late := utc(2026, time.October, 25, 0, 30, 0).In(rome), utc(2026, time.October, 25, 1, 30, 0).In(rome)
	require.Equal(t, early.Format("15:04"), late.Format("15:04"), "the repeated hour")
	require.NotEqual(t, early.Format("MST"), late.Format("MST"))
	const mar29 = "2026-03-29 26 d088 w13 2026 2026..2026 26"
	const oct25 = "2026-10-25 26 d298 w43 2026 2026..2026 26"
	checkEdges(t, []edge{
		{"02:30 that does not exist", time.Date(2026, time.March, 29, 2, 30, 0, 0, rome), MonthDay{}, mar29},
		{"last second of CET", utc(2026, time.March, 29, 0, 59, 59).In(rome), MonthDay{}, mar29},
		{"first second of CEST", utc(2026, time.March, 29, 1, 0, 0).In(rome), MonthDay{}, mar29},
		{"midnight opening the day", utc(2026, time.March, 28, 23, 0, 0).In(rome), MonthDay{}, mar29},
		{"second before it", utc(2026, time.March, 28, 22, 59, 59).In(rome), MonthDay{}, "2026-03-28 26 d087 w13 2026 2026..2026 26"},
		{"last second of the short day", utc(2026, time.March, 29, 21, 59, 59).In(rome), MonthDay{}, mar29},
		{"midnight after it", utc(2026, time.March, 29, 22, 0, 0).In(rome), MonthDay{}, "2026-03-30 26 d089 w14 2026 2026..2026 26"},
		{"02:30 CEST", early, april1, "2026-10-25 26 d298 w43 2026-27 2026..2027 26-27"},
		{"02:30 CET, an hour later", late, april1, "2026-10-25 26 d298 w43 2026-27 2026..2027 26-27"},
		{"02:30 as a wall clock", time.Date(2026, time.October, 25, 2, 30, 0, 0, rome), MonthDay{}, oct25},
		{"last second of the long day", utc(2026, time.October, 25, 22, 59, 59).In(rome), MonthDay{}, oct25},
		{"midnight after it", utc(2026, time.October, 25, 23, 0, 0).In(rome), MonthDay{}, "2026-10-26 26 d299 w44 2026 2026..2026 26"},
	})
}

func TestEdgeDSTNewYork(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	oct1 := MonthDay{Month: time.October, Day: 1}
	// 8 March 2026: 02:00 EST jumps to 03:00 EDT. 1 November 2026: 02:00
	// EDT falls back to 01:00 EST, so 01:30 happens twice.
	early, late := utc(2026, time.November, 1, 5, 30, 0).In(ny), utc(2026, time.November, 1, 6, 30, 0).In(ny)
	require.Equal(t, early.Format("15:04"), late.Format("15:04"), "the repeated hour")
	require.NotEqual(t, early.Format("MST"), late.Format("MST"))
	const mar8 = "2026-03-08 26 d067 w10 2025-26 2025..2026 25-26"
	const nov1 = "2026-11-01 26 d305 w44 2026-27 2026..2027 26-27"
	checkEdges(t, []edge{
		{"02:30 that does not exist", time.Date(2026, time.March, 8, 2, 30, 0, 0, ny), oct1, mar8},
		{"last second of EST", utc(2026, time.March, 8, 6, 59, 59).In(ny), oct1, mar8},
		{"first second of EDT", utc(2026, time.March, 8, 7, 0, 0).In(ny), oct1, mar8},
		{"midnight opening the day", utc(2026, time.March, 8, 5, 0, 0).In(ny), oct1, mar8},
		{"second before it", utc(2026, time.March, 8, 4, 59, 59).In(ny), oct1, "2026-03-07 26 d066 w10 2025-26 2025..2026 25-26"},
		{"last second of the short day", utc(2026, time.March, 9, 3, 59, 59).In(ny), oct1, mar8},
		{"midnight after it", utc(2026, time.March, 9, 4, 0, 0).In(ny), oct1, "2026-03-09 26 d068 w11 2025-26 2025..2026 25-26"},
		{"01:30 EDT", early, oct1, nov1},
		{"01:30 EST, an hour later", late, oct1, nov1},
		{"01:30 as a wall clock", time.Date(2026, time.November, 1, 1, 30, 0, 0, ny), oct1, nov1},
		{"last second of the long day", utc(2026, time.November, 2, 4, 59, 59).In(ny), oct1, nov1},
		{"midnight after it", utc(2026, time.November, 2, 5, 0, 0).In(ny), oct1, "2026-11-02 26 d306 w45 2026-27 2026..2027 26-27"},
	})
}

func TestEdgeLeapDay(t *testing.T) {
	rome := loadLocation(t, "Europe/Rome")
	mar1 := MonthDay{Month: time.March, Day: 1}
	feb28 := MonthDay{Month: time.February, Day: 28}
	checkEdges(t, []edge{
		{"29 February", utc(2024, time.February, 29, 12, 0, 0), MonthDay{}, "2024-02-29 24 d060 w09 2024 2024..2024 24"},
		{"the day before", utc(2024, time.February, 28, 12, 0, 0), MonthDay{}, "2024-02-28 24 d059 w09 2024 2024..2024 24"},
		{"the day after", utc(2024, time.March, 1, 12, 0, 0), MonthDay{}, "2024-03-01 24 d061 w09 2024 2024..2024 24"},
		{"1 March of a common year", utc(2023, time.March, 1, 12, 0, 0), MonthDay{}, "2023-03-01 23 d060 w09 2023 2023..2023 23"},
		{"28 February of a common year", utc(2023, time.February, 28, 12, 0, 0), MonthDay{}, "2023-02-28 23 d059 w09 2023 2023..2023 23"},
		{"already 29 February in Rome", utc(2024, time.February, 28, 23, 30, 0).In(rome), MonthDay{}, "2024-02-29 24 d060 w09 2024 2024..2024 24"},
		{"fiscal 1 March: last day", utc(2024, time.February, 29, 23, 59, 59), mar1, "2024-02-29 24 d060 w09 2023-24 2023..2024 23-24"},
		{"fiscal 1 March: first day", utc(2024, time.March, 1, 0, 0, 0), mar1, "2024-03-01 24 d061 w09 2024-25 2024..2025 24-25"},
		{"fiscal 28 February: 29 February is in the new year", utc(2024, time.February, 29, 0, 0, 0), feb28, "2024-02-29 24 d060 w09 2024-25 2024..2025 24-25"},
		{"fiscal 28 February: the day before it", utc(2024, time.February, 27, 23, 59, 59), feb28, "2024-02-27 24 d058 w09 2023-24 2023..2024 23-24"},
	})
	_, err := ParseMonthDay("02-29")
	assert.ErrorIs(t, err, ErrInvalid, "a fiscal year cannot start on a day most years lack")
	_, err = ParseFormatWith("{FY}{seq}", FormatOptions{FiscalStart: MonthDay{Month: time.February, Day: 29}})
	assert.ErrorIs(t, err, ErrInvalid)
}

func TestEdgeFiscalApril(t *testing.T) {
	rome := loadLocation(t, "Europe/Rome")
	const mar31 = "2026-03-31 26 d090 w14 2025-26 2025..2026 25-26"
	const apr1 = "2026-04-01 26 d091 w14 2026-27 2026..2027 26-27"
	at := utc(2026, time.March, 31, 22, 30, 0) // 00:30 CEST on 1 April in Rome
	checkEdges(t, []edge{
		{"last second of FY2025-26", time.Date(2026, time.March, 31, 23, 59, 59, 0, rome), april1, mar31},
		{"first second of FY2026-27", time.Date(2026, time.April, 1, 0, 0, 0, 0, rome), april1, apr1},
		{"UTC", at, april1, mar31},
		{"Rome", at.In(rome), april1, apr1},
		{"a year before", time.Date(2025, time.April, 1, 0, 0, 0, 0, rome), april1, "2025-04-01 25 d091 w14 2025-26 2025..2026 25-26"},
	})
	f, err := ParseFormatWith("FY{FY}/{seq:04}", FormatOptions{FiscalStart: april1, Location: rome})
	require.NoError(t, err)
	assert.Equal(t, "FY2026-27/0001", f.FormatAt(1, at))
	assert.Equal(t, "FY2025-26/0002", f.FormatAt(2, at.Add(-time.Hour)))
}

func TestEdgeFiscalJuly(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	checkEdges(t, []edge{
		{"30 June", utc(2026, time.June, 30, 23, 59, 59), july1, "2026-06-30 26 d181 w27 2025-26 2025..2026 25-26"},
		{"1 July", utc(2026, time.July, 1, 0, 0, 0), july1, "2026-07-01 26 d182 w27 2026-27 2026..2027 26-27"},
		{"still 30 June in New York", utc(2026, time.July, 1, 3, 30, 0).In(ny), july1, "2026-06-30 26 d181 w27 2025-26 2025..2026 25-26"},
		{"1 July in New York", utc(2026, time.July, 1, 4, 0, 0).In(ny), july1, "2026-07-01 26 d182 w27 2026-27 2026..2027 26-27"},
	})
}

func TestEdgeFiscalCentury(t *testing.T) {
	checkEdges(t, []edge{
		{"before", utc(2099, time.June, 30, 23, 59, 59), july1, "2099-06-30 99 d181 w27 2098-99 2098..2099 98-99"},
		{"first day of FY2099-00", utc(2099, time.July, 1, 0, 0, 0), july1, "2099-07-01 99 d182 w27 2099-00 2099..2100 99-00"},
		{"last day of FY2099-00", utc(2100, time.June, 30, 23, 59, 59), july1, "2100-06-30 00 d181 w26 2099-00 2099..2100 99-00"},
		{"after", utc(2100, time.July, 1, 0, 0, 0), july1, "2100-07-01 00 d182 w26 2100-01 2100..2101 00-01"},
		{"calendar fiscal year 2100", utc(2100, time.July, 1, 0, 0, 0), MonthDay{}, "2100-07-01 00 d182 w26 2100 2100..2100 00"},
	})
}

func TestEdgeWeek53(t *testing.T) {
	noon := func(y int, m time.Month, d int) time.Time { return utc(y, m, d, 12, 0, 0) }
	checkEdges(t, []edge{
		{"31 December 2020", noon(2020, time.December, 31), MonthDay{}, "2020-12-31 20 d366 w53 2020 2020..2020 20"},
		{"1 January 2021, ISO year 2020", noon(2021, time.January, 1), MonthDay{}, "2021-01-01 21 d001 w53 2021 2021..2021 21"},
		{"3 January 2021, ISO year 2020", noon(2021, time.January, 3), MonthDay{}, "2021-01-03 21 d003 w53 2021 2021..2021 21"},
		{"4 January 2021", noon(2021, time.January, 4), MonthDay{}, "2021-01-04 21 d004 w01 2021 2021..2021 21"},
		{"31 December 2026", noon(2026, time.December, 31), MonthDay{}, "2026-12-31 26 d365 w53 2026 2026..2026 26"},
		{"3 January 2027, ISO year 2026", noon(2027, time.January, 3), MonthDay{}, "2027-01-03 27 d003 w53 2027 2027..2027 27"},
		{"4 January 2027", noon(2027, time.January, 4), MonthDay{}, "2027-01-04 27 d004 w01 2027 2027..2027 27"},
		{"30 December 2024, ISO year 2025", noon(2024, time.December, 30), MonthDay{}, "2024-12-30 24 d365 w01 2024 2024..2024 24"},
		{"31 December 2024, ISO year 2025", noon(2024, time.December, 31), MonthDay{}, "2024-12-31 24 d366 w01 2024 2024..2024 24"},
		{"31 December 1900, ISO year 1901", noon(1900, time.December, 31), MonthDay{}, "1900-12-31 00 d365 w01 1900 1900..1900 00"},
	})
}

func TestEdgeDOYLeapYearEnd(t *testing.T) {
	rome := loadLocation(t, "Europe/Rome")
	checkEdges(t, []edge{
		{"2024, a leap year", utc(2024, time.December, 31, 23, 59, 59), MonthDay{}, "2024-12-31 24 d366 w01 2024 2024..2024 24"},
		{"2000, divisible by 400", utc(2000, time.December, 31, 12, 0, 0), MonthDay{}, "2000-12-31 00 d366 w52 2000 2000..2000 00"},
		{"2100, a century, not leap", utc(2100, time.December, 31, 12, 0, 0), MonthDay{}, "2100-12-31 00 d365 w52 2100 2100..2100 00"},
		{"2023, a common year", utc(2023, time.December, 31, 12, 0, 0), MonthDay{}, "2023-12-31 23 d365 w52 2023 2023..2023 23"},
		{"already 2025 in Rome", utc(2024, time.December, 31, 23, 30, 0).In(rome), MonthDay{}, "2025-01-01 25 d001 w01 2025 2025..2025 25"},
	})
}
