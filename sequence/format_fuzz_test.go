package sequence_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/noydb-go/noydb/sequence"
)

var fuzzZones = []string{"UTC", "Europe/Rome", "America/New_York", "Australia/Sydney", "Pacific/Chatham"}

// FuzzParseFormatTokens parses templates with every kind of token, meta
// values and fiscal starts from the fuzzer, and renders them at arbitrary
// dates: no panic, a *ValidationError for every refusal, a bounded valid
// UTF-8 rendering for every template accepted, and literal text (braces
// excepted, which are refused with a clear reason) kept as it is.
func FuzzParseFormatTokens(f *testing.F) {
	for _, seed := range []string{
		"FY{FY}/{seq:04}", "{YYYY}{MM}{DD}-{seq}", "{YY}.{DOY}.W{WW}/{seq:06}", "{FY_START}-{FY_END} {TFY} {seq}",
		"{meta.code}/{partition.0}/{seq:04}", "{meta.}{seq}", "{meta.missing}{seq}", "{meta.code}", "{{YYYY}}{seq}",
		"{YYYY}}{seq}", "{yyyy}{seq}", "№ {TFY} ✓ {seq}", "{FY}{FY}{FY}{FY}{FY}{FY}{FY}{FY}{FY}{FY}{FY}{seq:020}",
	} {
		f.Add(seed, "AT-1", uint64(42), int64(1_778_000_000), uint8(4), uint8(1), uint8(1))
	}
	f.Add("{meta.code}{seq}", "bad\nvalue", uint64(1), int64(0), uint8(7), uint8(1), uint8(2))
	f.Add("{meta.code}{seq}", "bad\xff", uint64(1), int64(-1<<40), uint8(2), uint8(29), uint8(3))
	f.Add("{DOY}{seq}", "", uint64(0), int64(1<<62), uint8(12), uint8(31), uint8(4))
	zones := make([]*time.Location, len(fuzzZones))
	for i, name := range fuzzZones {
		loc, err := time.LoadLocation(name)
		if err != nil {
			f.Fatal(err)
		}
		zones[i] = loc
	}
	f.Fuzz(func(t *testing.T, format, metaValue string, n uint64, unix int64, month, day, zone uint8) {
		o := sequence.FormatOptions{
			Partition:   []any{2026, "EU"},
			FiscalStart: sequence.MonthDay{Month: time.Month(month % 13), Day: int(day % 32)},
			Location:    zones[int(zone)%len(zones)],
			Meta:        map[string]string{"code": metaValue, "x": "{seq}"},
		}
		fm, err := sequence.ParseFormatWith(format, o)
		if err != nil {
			var ve *sequence.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, sequence.ErrInvalid) {
				t.Fatalf("%q: %v is not a *ValidationError", format, err)
			}
			if ve.Field != "format" && ve.Field != "fiscal start" {
				t.Fatalf("%q: field %q", format, ve.Field)
			}
			return
		}
		base := time.Unix(unix, 0)
		for _, at := range []time.Time{base, base.Add(time.Hour), base.AddDate(0, 6, 1), base.Add(-time.Hour), {}} {
			out := fm.FormatAt(n, at)
			if len(out) > sequence.MaxFormattedLen || !utf8.ValidString(out) {
				t.Fatalf("%q at %v rendered %d bytes, valid UTF-8 %v", format, at, len(out), utf8.ValidString(out))
			}
			if !fm.Dated() && out != fm.Format(n) {
				t.Fatalf("%q has no date token but renders %q at %v and %q today", format, out, at, fm.Format(n))
			}
			// The day fm keeps renders as a fresh Formatter does.
			if fresh, err := sequence.ParseFormatWith(format, o); err != nil || fresh.FormatAt(n, at) != out {
				t.Fatalf("%q at %v: %q, a fresh Formatter renders otherwise (%v)", format, at, out, err)
			}
		}
		checkLiteral(t, format, n)
	})
}

// checkLiteral takes the fuzzer's format as literal text before {seq}: text
// without braces renders as it is; text with a brace outside a token is
// refused, saying braces cannot be escaped.
func checkLiteral(t *testing.T, lit string, n uint64) {
	t.Helper()
	format := lit + "{seq}"
	if len(format) > sequence.MaxFormatLen || !utf8.ValidString(format) {
		return
	}
	fm, err := sequence.ParseFormat(format)
	if !strings.ContainsAny(lit, "{}") {
		if err != nil {
			t.Fatalf("literal %q refused: %v", lit, err)
		}
		if got, want := fm.Format(n), lit+strconv.FormatUint(n, 10); got != want {
			t.Fatalf("literal %q rendered %q, want %q", lit, got, want)
		}
		return
	}
	if strings.ContainsAny(tokenRe.ReplaceAllString(lit, ""), "{}") {
		if err == nil {
			t.Fatalf("%q has a brace outside a token but was accepted", format)
		}
		if !strings.Contains(err.Error(), "cannot be escaped") {
			t.Fatalf("%q refused without saying why: %v", format, err)
		}
	}
}
