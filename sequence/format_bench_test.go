package sequence_test

import (
	"testing"
	"time"

	"github.com/noydb-go/noydb/sequence"
)

func benchFormat(b *testing.B, format string, o sequence.FormatOptions) {
	f, err := sequence.ParseFormatWith(format, o)
	if err != nil {
		b.Fatal(err)
	}
	date := time.Date(2026, time.May, 14, 10, 30, 0, 0, time.UTC)
	if o.Location != nil {
		date = date.In(o.Location)
	}
	b.ReportAllocs()
	n := uint64(0)
	for b.Loop() {
		n++
		_ = f.FormatAt(n, date)
	}
}

// BenchmarkFormatSeq renders a padded number: the cost of formatting
// before date tokens existed.
func BenchmarkFormatSeq(b *testing.B) { benchFormat(b, "INV-{seq:05}", sequence.FormatOptions{}) }

// BenchmarkFormatDated renders a padded number with the year and month of
// the document date: it should cost about what BenchmarkFormatSeq does.
func BenchmarkFormatDated(b *testing.B) {
	benchFormat(b, "INV-{YYYY}/{MM}-{seq:05}", sequence.FormatOptions{})
}

// BenchmarkFormatDatedRome is BenchmarkFormatDated for a date already in
// the series' location, Europe/Rome, as a Sequence renders it.
func BenchmarkFormatDatedRome(b *testing.B) {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		b.Fatal(err)
	}
	benchFormat(b, "INV-{YYYY}/{MM}-{seq:05}", sequence.FormatOptions{Location: rome})
}

// BenchmarkFormatEveryToken renders every date token and a meta value.
func BenchmarkFormatEveryToken(b *testing.B) {
	benchFormat(b, "{meta.code} {YYYY}{YY}{MM}{DD}{DOY}W{WW} FY{FY} {FY_START}-{FY_END} {TFY}/{seq:04}",
		sequence.FormatOptions{FiscalStart: sequence.MonthDay{Month: time.April, Day: 1}, Meta: map[string]string{"code": "AT1"}})
}

// BenchmarkFormatSeqSameLength renders as long a number as
// BenchmarkFormatDated, with the date as literal text: the difference
// between the two is the cost of the date tokens.
func BenchmarkFormatSeqSameLength(b *testing.B) {
	benchFormat(b, "INV-2026/05-{seq:05}", sequence.FormatOptions{})
}
