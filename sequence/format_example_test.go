package sequence_test

import (
	"fmt"
	"time"

	"github.com/noydb-go/noydb/sequence"
)

// A firm whose fiscal year starts on 1 April numbers its invoices by fiscal
// year, in Rome's time zone.
func ExampleParseFormatWith() {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := sequence.ParseFormatWith("FY{FY}/{seq:04}", sequence.FormatOptions{
		FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location:    rome,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.FormatAt(1, time.Date(2026, time.May, 14, 10, 0, 0, 0, rome)))
	fmt.Println(f.FormatAt(17, time.Date(2026, time.March, 31, 18, 0, 0, 0, rome)))
	// 22:30 UTC on 31 March is already 1 April in Rome.
	fmt.Println(f.FormatAt(2, time.Date(2026, time.March, 31, 22, 30, 0, 0, time.UTC)))
	// Output:
	// FY2026-27/0001
	// FY2025-26/0017
	// FY2026-27/0002
}

// A registered series code from the series' meta, and the date of the
// document.
func ExampleFormatter_FormatAt() {
	f, err := sequence.ParseFormatWith("{meta.code}/{YYYY}-{MM}/{seq:05}", sequence.FormatOptions{
		Meta: map[string]string{"code": "FT-A"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(f.FormatAt(42, time.Date(2026, time.January, 5, 9, 0, 0, 0, time.UTC)))
	// Output:
	// FT-A/2026-01/00042
}
