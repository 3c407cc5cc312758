package sequence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/noydb-go/noydb/sequence"
)

// A credit-note series corrects the invoices: each of its numbers names
// the invoice it corrects, and the audit of either series shows the pair.
func ExampleSequence_Correcting() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()

	invoices, err := v.Sequence("invoices", sequence.Options{Format: "F-{seq:03}"})
	if err != nil {
		panic(err)
	}
	credits, err := v.Sequence("credit-notes", sequence.Options{Format: "NC-{seq:03}", Corrects: "invoices"})
	if err != nil {
		panic(err)
	}
	for range 3 {
		if _, err := invoices.Next(ctx); err != nil {
			panic(err)
		}
	}

	cn, err := credits.Correcting(sequence.Ref{N: 2}).NextSerial(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(cn.Formatted, "corrects F-002")

	_, err = credits.Next(ctx)
	fmt.Println(errors.Is(err, sequence.ErrCorrectionNeeded))
	_, err = credits.NextCorrecting(ctx, sequence.Ref{N: 7})
	fmt.Println(errors.Is(err, sequence.ErrNotIssued))

	rep, err := invoices.Audit(ctx)
	if err != nil {
		panic(err)
	}
	for _, c := range rep.CorrectedBy {
		fmt.Printf("%s is corrected by %s\n", c.Of, c.By)
	}
	// Output:
	// NC-001 corrects F-002
	// true
	// true
	// "invoices" number 2 is corrected by "credit-notes" number 1
}

// PeriodLabel names the period a handle's next number goes into.
func ExampleSequence_PeriodLabel() {
	ctx := context.Background()
	v := exampleVault()
	defer v.Close()

	invoices, err := v.Sequence("invoices", sequence.Options{
		Period:      sequence.PeriodFiscalYear,
		FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
	})
	if err != nil {
		panic(err)
	}
	for _, d := range []time.Time{
		time.Date(2026, time.March, 31, 12, 0, 0, 0, time.UTC),
		time.Date(2026, time.April, 1, 12, 0, 0, 0, time.UTC),
	} {
		label, err := invoices.At(d).PeriodLabel(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Format(time.DateOnly), label)
	}
	// Output:
	// 2026-03-31 FY2025-26
	// 2026-04-01 FY2026-27
}
