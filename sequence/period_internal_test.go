package sequence

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPeriodLabels(t *testing.T) {
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	// 23:30 UTC on 31 December is already 1 January in Rome.
	utc := time.Date(2025, time.December, 31, 23, 30, 0, 0, time.UTC)
	apr := MonthDay{Month: time.April, Day: 1}
	for _, c := range []struct {
		p     Period
		start MonthDay
		t     time.Time
		want  string
	}{
		{PeriodDay, MonthDay{}, utc, "2025-12-31"},
		{PeriodDay, MonthDay{}, utc.In(rome), "2026-01-01"},
		{PeriodMonth, MonthDay{}, utc.In(rome), "2026-01"},
		{PeriodYear, MonthDay{}, utc, "2025"},
		{PeriodYear, MonthDay{}, utc.In(rome), "2026"},
		{PeriodFiscalYear, MonthDay{}, utc, "FY2025"},
		{PeriodFiscalYear, apr, time.Date(2026, time.March, 31, 23, 59, 59, 0, rome), "FY2025-26"},
		{PeriodFiscalYear, apr, time.Date(2026, time.April, 1, 0, 0, 0, 0, rome), "FY2026-27"},
		{PeriodFiscalYear, MonthDay{Month: time.July, Day: 1}, time.Date(2099, time.July, 1, 0, 0, 0, 0, time.UTC), "FY2099-00"},
		{PeriodNone, MonthDay{}, utc, ""},
	} {
		assert.Equal(t, c.want, periodLabel(c.p, c.start, c.t), "%v from %v at %v", c.p, c.start, c.t)
	}
}

func TestPeriodNames(t *testing.T) {
	for p := PeriodNone; p.valid(); p++ {
		got, err := ParsePeriod(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, got)
	}
	_, err := ParsePeriod("week")
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Equal(t, "Period(9)", Period(9).String())
}

func TestMonthDay(t *testing.T) {
	md, err := ParseMonthDay("04-01")
	require.NoError(t, err)
	assert.Equal(t, MonthDay{Month: time.April, Day: 1}, md)
	assert.Equal(t, "04-01", md.String())
	assert.Equal(t, "01-01", MonthDay{}.String())
	for _, bad := range []string{"02-29", "13-01", "00-10", "04-31", "4", "a-b", "+4-1", "04-00"} {
		_, err := ParseMonthDay(bad)
		assert.ErrorIs(t, err, ErrInvalid, bad)
	}
	first, last := fiscalYear(MonthDay{}, time.Date(2026, time.May, 3, 0, 0, 0, 0, time.UTC))
	assert.Equal(t, [2]int{2026, 2026}, [2]int{first, last})
	assert.Equal(t, "2026", fiscalLabel(first, last))
}

// BenchmarkPeriodLabel names the fiscal-year period of a date in Rome, as
// taking a number by document date does once per call.
func BenchmarkPeriodLabel(b *testing.B) {
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(b, err)
	at := time.Date(2026, time.May, 14, 10, 30, 0, 0, rome)
	start := MonthDay{Month: time.April, Day: 1}
	b.ReportAllocs()
	for b.Loop() {
		_ = periodLabel(PeriodFiscalYear, start, at)
	}
}
