package sequence_test

import (
	"testing"
	"time"

	"github.com/noydb-go/noydb/sequence"
)

// benchFormat renders numbers dated at (in o.Location).
func benchFormat(b *testing.B, format string, o sequence.FormatOptions, at time.Time) {
	benchFormatAfter(b, format, o, time.Time{}, at)
}

// benchFormatAfter renders a number dated first, then numbers dated at.
func benchFormatAfter(b *testing.B, format string, o sequence.FormatOptions, first, at time.Time) {
	f, err := sequence.ParseFormatWith(format, o)
	if err != nil {
		b.Fatal(err)
	}
	if o.Location != nil {
		at = at.In(o.Location)
	}
	if !first.IsZero() {
		_ = f.FormatAt(0, first)
	}
	b.ReportAllocs()
	n := uint64(0)
	for b.Loop() {
		n++
		_ = f.FormatAt(n, at)
	}
}

// otherDay is a document date that is not today.
var otherDay = time.Date(2026, time.May, 14, 10, 30, 0, 0, time.UTC)

// BenchmarkFormatSeq renders a padded number: the cost of formatting
// before date tokens existed.
func BenchmarkFormatSeq(b *testing.B) {
	benchFormat(b, "INV-{seq:05}", sequence.FormatOptions{}, otherDay)
}

// BenchmarkFormatSeqSameLength renders as long a number as
// BenchmarkFormatDated, with the date as literal text.
func BenchmarkFormatSeqSameLength(b *testing.B) {
	benchFormat(b, "INV-2026/05-{seq:05}", sequence.FormatOptions{}, otherDay)
}

// BenchmarkFormatDated renders a padded number with the year and month of
// today's date, as numbers taken now are (from the template the Formatter
// keeps for the day): it should cost about what BenchmarkFormatSeq does.
func BenchmarkFormatDated(b *testing.B) {
	benchFormat(b, "INV-{YYYY}/{MM}-{seq:05}", sequence.FormatOptions{}, time.Now())
}

// BenchmarkFormatDatedBackDated is BenchmarkFormatDated for documents
// dated before a day already rendered (back-dated), rendered token by
// token.
func BenchmarkFormatDatedBackDated(b *testing.B) {
	benchFormatAfter(b, "INV-{YYYY}/{MM}-{seq:05}", sequence.FormatOptions{}, time.Now(), otherDay)
}

// BenchmarkFormatDatedRome is BenchmarkFormatDated in Europe/Rome.
func BenchmarkFormatDatedRome(b *testing.B) {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		b.Fatal(err)
	}
	benchFormat(b, "INV-{YYYY}/{MM}-{seq:05}", sequence.FormatOptions{Location: rome}, time.Now())
}

var everyToken = "{meta.code} {YYYY}{YY}{MM}{DD}{DOY}W{WW} FY{FY} {FY_START}-{FY_END} {TFY}/{seq:04}"

func everyTokenOptions() sequence.FormatOptions {
	return sequence.FormatOptions{FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}, Meta: map[string]string{"code": "AT1"}}
}

// BenchmarkFormatEveryToken renders every date token and a meta value for
// today.
func BenchmarkFormatEveryToken(b *testing.B) {
	benchFormat(b, everyToken, everyTokenOptions(), time.Now())
}

// BenchmarkFormatEveryTokenBackDated renders every date token and a meta
// value for back-dated documents, token by token.
func BenchmarkFormatEveryTokenBackDated(b *testing.B) {
	benchFormatAfter(b, everyToken, everyTokenOptions(), time.Now(), otherDay)
}
