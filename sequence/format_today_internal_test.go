package sequence

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A template keeps the latest day it rendered and uses it for every instant
// of that day, and only for them: the seconds either side of the day,
// another location or another fiscal start render token by token. An
// earlier day leaves it in place, a later one replaces it.
func TestFormatKeepsLatestDay(t *testing.T) {
	rome := loadLocation(t, "Europe/Rome")
	now := time.Date(2026, time.May, 14, 10, 0, 0, 0, rome)
	tmpl := fresh(t, edgeLine, nil, nil)
	const may14 = "2026-05-14 26 d134 w20 2026-27 2026..2027 26-27"
	const may13 = "2026-05-13 26 d133 w20 2026-27 2026..2027 26-27"
	assert.Equal(t, may14+" #1", tmpl.format(1, now, april1))
	kept := tmpl.day.Load()
	require.NotNil(t, kept)
	require.NotNil(t, kept.plain, "14 May has no DST change: its template is kept")
	assert.Equal(t, time.Date(2026, time.May, 14, 0, 0, 0, 0, rome).Unix(), kept.lo)
	assert.Equal(t, time.Date(2026, time.May, 15, 0, 0, 0, 0, rome).Unix(), kept.hi)
	for _, c := range []struct {
		at    time.Time
		start MonthDay
		want  string
	}{
		{time.Date(2026, time.May, 14, 0, 0, 0, 0, rome), april1, may14},
		{time.Date(2026, time.May, 14, 23, 59, 59, 999999999, rome), april1, may14},
		{time.Date(2026, time.May, 13, 23, 59, 59, 999999999, rome), april1, may13},
		{time.Date(2025, time.May, 14, 12, 0, 0, 0, rome), april1, "2025-05-14 25 d134 w20 2025-26 2025..2026 25-26"},
		// Another location: 01:30 on 14 May in Rome is 13 May in UTC.
		{time.Date(2026, time.May, 14, 1, 30, 0, 0, rome).UTC(), april1, may13},
		{time.Date(2026, time.May, 14, 12, 0, 0, 0, rome).UTC(), april1, may14},
		{time.Date(2026, time.May, 15, 12, 0, 0, 0, rome).UTC(), april1, "2026-05-15 26 d135 w20 2026-27 2026..2027 26-27"},
		// Another fiscal start.
		{time.Date(2026, time.May, 14, 12, 0, 0, 0, rome), july1, "2026-05-14 26 d134 w20 2025-26 2025..2026 25-26"},
		{time.Date(2026, time.May, 15, 12, 0, 0, 0, rome), MonthDay{}, "2026-05-15 26 d135 w20 2026 2026..2026 26"},
	} {
		assert.Equal(t, c.want+" #7", tmpl.format(7, c.at, c.start), "%v from %v", c.at, c.start)
	}
	assert.Same(t, kept, tmpl.day.Load(), "earlier days, other locations and fiscal starts leave the day in place")
	// The next day replaces it, its first second included.
	assert.Equal(t, "2026-05-15 26 d135 w20 2026-27 2026..2027 26-27 #8", tmpl.format(8, time.Date(2026, time.May, 15, 0, 0, 0, 0, rome), april1))
	next := tmpl.day.Load()
	require.NotSame(t, kept, next)
	assert.Equal(t, [3]int{2026, 5, 15}, next.date)
	assert.Equal(t, "2026-05-15 26 d135 w20 2026-27 2026..2027 26-27 #9", tmpl.format(9, time.Date(2026, time.May, 15, 23, 0, 0, 0, rome), april1))
	assert.Equal(t, may14+" #10", tmpl.format(10, now, april1))
	assert.Same(t, next, tmpl.day.Load())
}

// A day whose offset changes is kept without a template: its instants are
// not 86400 seconds from one local midnight. Every instant around it
// renders its own date.
func TestFormatDayWithDSTChange(t *testing.T) {
	rome := loadLocation(t, "Europe/Rome")
	santiago := loadLocation(t, "America/Santiago")
	for _, now := range []time.Time{
		time.Date(2026, time.March, 29, 12, 0, 0, 0, rome),
		time.Date(2026, time.October, 25, 12, 0, 0, 0, rome),
		time.Date(2026, time.September, 6, 12, 0, 0, 0, santiago), // clocks jump from 24:00 to 01:00
	} {
		tmpl := fresh(t, edgeLine, nil, nil)
		y, m, d := now.Date()
		want := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
		assert.Contains(t, tmpl.format(1, now, MonthDay{}), want)
		kept := tmpl.day.Load()
		require.NotNil(t, kept)
		assert.Nil(t, kept.plain, "%v", now)
		// Every quarter of an hour of the day and the day before renders
		// its own date.
		loc := now.Location()
		end := time.Date(y, m, d+1, 0, 0, 0, 0, loc)
		for at := time.Date(y, m, d-1, 0, 0, 0, 0, loc); at.Before(end); at = at.Add(15 * time.Minute) {
			local := at.In(loc)
			assert.Equal(t, fresh(t, edgeLine, nil, nil).format(1, local, MonthDay{}), tmpl.format(1, local, MonthDay{}), "%v", local)
		}
		assert.Same(t, kept, tmpl.day.Load(), "the DST day stays the latest")
		// The next day replaces it.
		assert.Equal(t, fresh(t, edgeLine, nil, nil).format(1, end, MonthDay{}), tmpl.format(1, end, MonthDay{}))
		assert.NotNil(t, tmpl.day.Load().plain, "%v", end)
	}
}

// Callers rendering numbers of several days at once all get their own
// date's rendering.
func TestFormatDaysConcurrent(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	now := time.Date(2026, time.June, 3, 9, 0, 0, 0, ny)
	shared := fresh(t, edgeLine, nil, nil)
	want := make(map[time.Time]string)
	for h := -36; h < 36; h++ {
		at := now.Add(time.Duration(h) * time.Hour)
		want[at] = fresh(t, edgeLine, nil, nil).format(1, at, july1)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				at := now.Add(time.Duration((g*300+i*(g+1))%72-36) * time.Hour)
				if got := shared.format(1, at, july1); got != want[at] {
					t.Errorf("%v: %q, want %q", at, got, want[at])
					return
				}
			}
		})
	}
	wg.Wait()
}
