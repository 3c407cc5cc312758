package sequence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/sequence"
)

func TestParseFormatWithTokens(t *testing.T) {
	rome, err := time.LoadLocation("Europe/Rome")
	require.NoError(t, err)
	o := sequence.FormatOptions{
		Partition:   []any{"MI"},
		FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location:    rome,
		Meta:        map[string]string{"code": "AT-7", "braces": "{x}"},
	}
	// 14 May 2026, 23:30 UTC: already 15 May in Rome, a Friday of ISO week 20.
	at := time.Date(2026, time.May, 14, 23, 30, 0, 0, time.UTC)
	for format, want := range map[string]string{
		"{seq}":                              "7",
		"{meta.code}/{partition.0}/{seq:04}": "AT-7/MI/0007",
		"{meta.braces}{seq}":                 "{x}7",
		"{YYYY}{MM}{DD}-{seq}":               "20260515-7",
		"{YY}.{DOY}.W{WW}-{seq}":             "26.135.W20-7",
		"FY{FY}/{seq:04}":                    "FY2026-27/0007",
		"{FY_START}-{FY_END}/{TFY}/{seq}":    "2026-2027/26-27/7",
	} {
		f, err := sequence.ParseFormatWith(format, o)
		require.NoError(t, err, format)
		assert.Equal(t, want, f.FormatAt(7, at), format)
	}
}

func TestFormatterDated(t *testing.T) {
	for _, format := range []string{"{seq}", "{partition.0}{seq:03}", "{meta.k}{seq}"} {
		f, err := sequence.ParseFormatWith(format, sequence.FormatOptions{Partition: []any{1}, Meta: map[string]string{"k": "v"}})
		require.NoError(t, err, format)
		assert.False(t, f.Dated(), format)
		// Without date tokens the date does not matter.
		want := f.FormatAt(42, time.Time{})
		assert.Equal(t, want, f.Format(42), format)
		assert.Equal(t, want, f.FormatAt(42, time.Date(2031, time.July, 9, 0, 0, 0, 0, time.UTC)), format)
	}
	for _, tok := range []string{"YYYY", "YY", "MM", "DD", "DOY", "WW", "FY", "FY_START", "FY_END", "TFY"} {
		f, err := sequence.ParseFormat("{" + tok + "}{seq}")
		require.NoError(t, err, tok)
		assert.True(t, f.Dated(), tok)
	}
}

// Format renders a dated template with the current date: the rendering is
// the one of the date before or after the call, whichever day it is.
func TestFormatterFormatUsesToday(t *testing.T) {
	f, err := sequence.ParseFormat("{YYYY}-{MM}-{DD}/{seq}")
	require.NoError(t, err)
	before := time.Now()
	got := f.Format(3)
	after := time.Now()
	assert.Contains(t, []string{f.FormatAt(3, before), f.FormatAt(3, after)}, got)
}

func TestFormatTokenErrors(t *testing.T) {
	meta := map[string]string{
		"ok": "AT", "nl": "a\nb", "del": "a\x7fb", "c1": "a\u0085b", "utf8": "a\xffb",
		"long": strings.Repeat("x", sequence.MaxFormattedLen+1), "wide": strings.Repeat("x", 300),
	}
	for _, format := range []string{
		"{yyyy}{seq}", "{Y}{seq}", "{YYY}{seq}", "{FY_start}{seq}", "{W}{seq}", "{WW:2}{seq}", "{DOY }{seq}",
		"{meta}{seq}", "{meta.}{seq}", "{meta.missing}{seq}", "{meta.nl}{seq}", "{meta.del}{seq}", "{meta.c1}{seq}",
		"{meta.utf8}{seq}", "{meta.long}{seq}", "{meta.wide}{meta.wide}{meta.wide}{meta.wide}{seq}",
		"{YYYY}", "{meta.ok}", "{{YYYY}}{seq}", "{YYYY}}{seq}", "{{meta.ok}{seq}",
		strings.Repeat("{FY}", 60) + "{seq}",
	} {
		_, err := sequence.ParseFormatWith(format, sequence.FormatOptions{Meta: meta})
		var ve *sequence.ValidationError
		if assert.ErrorAs(t, err, &ve, "%q", format) {
			assert.ErrorIs(t, err, sequence.ErrInvalid)
			assert.Equal(t, "format", ve.Field, format)
		}
	}
	// Meta tokens need meta: ParseFormat has none.
	_, err := sequence.ParseFormat("{meta.ok}{seq}")
	assert.ErrorIs(t, err, sequence.ErrInvalid)
	// A literal brace is refused, and the reason says braces cannot be escaped.
	for _, format := range []string{"a{b{seq}", "{seq}}", "{{seq}}", "x}{seq}"} {
		_, err := sequence.ParseFormat(format)
		require.Error(t, err, format)
		assert.Contains(t, err.Error(), "cannot be escaped", format)
	}
	_, err = sequence.ParseFormatWith("{seq}", sequence.FormatOptions{FiscalStart: sequence.MonthDay{Month: time.February, Day: 29}})
	var ve *sequence.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "fiscal start", ve.Field)
}

// Every template parseFormat accepts renders at most MaxFormattedLen bytes,
// even for dates whose years have more than 4 digits.
func TestFormatBound(t *testing.T) {
	wide := strings.Repeat("x", 200)
	meta := map[string]string{"w": wide}
	format := "{meta.w}{meta.w}{meta.w}{meta.w}" + strings.Repeat("{FY}", 3) + "{seq:020}"
	f, err := sequence.ParseFormatWith(format, sequence.FormatOptions{Meta: meta, FiscalStart: sequence.MonthDay{Month: time.July, Day: 1}})
	require.NoError(t, err)
	for _, at := range []time.Time{
		time.Unix(1<<62, 0), time.Unix(-1<<62, 0), time.Date(-5, time.March, 1, 0, 0, 0, 0, time.UTC), {},
	} {
		out := f.FormatAt(^uint64(0), at)
		assert.LessOrEqual(t, len(out), sequence.MaxFormattedLen, "%v", at)
		assert.True(t, strings.HasPrefix(out, wide+wide+wide+wide), "%v", at)
	}
	_, err = sequence.ParseFormatWith(format+"{meta.w}", sequence.FormatOptions{Meta: meta})
	assert.ErrorIs(t, err, sequence.ErrInvalid, "one more meta value would pass the bound")
}
