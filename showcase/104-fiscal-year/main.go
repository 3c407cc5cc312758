// Command 104-fiscal-year shows numbering by fiscal year and credit notes,
// on the in-memory default store.
//
// A firm in Rome whose fiscal year starts on 1 April numbers its invoices
// "FY2026-27/0001", "FY2026-27/0002"… by the date of each invoice, not the
// date it is typed in: an invoice dated 31 March, entered after April's
// first invoices, takes the next number of fiscal year 2025-26. Closing
// 2025-26 then refuses any number dated into it. A credit-note series
// declared as correcting the invoices numbers a credit note for one
// invoice, and the audit of both series shows the pair.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/noydb-go/noydb"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// Invoice is an invoice or a credit note.
type Invoice struct {
	Number   string  `json:"number"`
	Date     string  `json:"date"`
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
	Corrects string  `json:"corrects,omitempty"`
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "104-fiscal-year:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		return err
	}
	db, err := noydb.Open(ctx, noydb.Config{User: "firm", Secret: []byte("firm-secret-2026")})
	if err != nil {
		return err
	}
	defer db.Close()
	books, err := db.OpenVault(ctx, "books")
	if err != nil {
		return err
	}

	// The series' definition is stored with it by its first number: every
	// process, device and the CLI then number it the same way.
	fiscal := sequence.Options{
		Period:      sequence.PeriodFiscalYear,
		FiscalStart: sequence.MonthDay{Month: time.April, Day: 1},
		Location:    rome,
	}
	invOpts := fiscal
	invOpts.Format = "FY{FY}/{seq:04}"
	invoices, err := books.Sequence("invoices", invOpts)
	if err != nil {
		return err
	}
	cnOpts := fiscal
	cnOpts.Format = "NC-FY{FY}/{seq:03}"
	cnOpts.Corrects = "invoices"
	credits, err := books.Sequence("credit-notes", cnOpts)
	if err != nil {
		return err
	}
	docs := vault.CollectionOf[Invoice](books, "invoices")
	notes := vault.CollectionOf[Invoice](books, "credit-notes")

	// put numbers an invoice dated date (a day in Rome) with seq, in the
	// same commit as the record.
	put := func(c *vault.Collection[Invoice], id string, seq *sequence.Sequence, date, customer string, total float64, corrects string) (Invoice, error) {
		d, err := time.ParseInLocation(time.DateOnly, date, rome)
		if err != nil {
			return Invoice{}, err
		}
		return c.PutNumbered(ctx, id, seq.At(d.Add(12*time.Hour)), func(s sequence.Serial) (Invoice, error) {
			return Invoice{Number: s.Formatted, Date: date, Customer: customer, Total: total, Corrects: corrects}, nil
		})
	}

	fmt.Fprintln(out, "invoices, numbered by fiscal year (1 April, Europe/Rome):")
	for _, inv := range []struct {
		id, date, customer string
		total              float64
	}{
		{"a1", "2026-03-10", "Rossi", 120},
		{"a2", "2026-03-27", "Bianchi", 80},
		{"b1", "2026-04-01", "Verdi", 300},
		{"b2", "2026-04-02", "Rossi", 45.5},
		{"b3", "2026-04-07", "Neri", 990},
		// Dated 31 March, typed in after April's first invoices: the
		// fiscal year 2025-26 is still open and takes it.
		{"a3", "2026-03-31", "Gallo", 60},
	} {
		got, err := put(docs, inv.id, invoices, inv.date, inv.customer, inv.total, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %s  %s  %-8s %7.2f\n", got.Number, got.Date, got.Customer, got.Total)
	}

	fmt.Fprintln(out, "\nclosing fiscal year 2025-26:")
	if err := invoices.ClosePeriod(ctx, "FY2025-26"); err != nil {
		return err
	}
	head, closed, err := invoices.PeekPeriod(ctx, "FY2025-26")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  FY2025-26 closed=%v, last number %d\n", closed, head)
	_, err = put(docs, "late", invoices, "2026-03-30", "Moretti", 15, "")
	var pce *sequence.PeriodClosedError
	if !errors.As(err, &pce) {
		return fmt.Errorf("a number dated into a closed year: want a *PeriodClosedError, got %v", err)
	}
	fmt.Fprintf(out, "  an invoice dated 2026-03-30 is refused: %v\n", pce)
	got, err := put(docs, "b4", invoices, "2026-04-09", "Moretti", 15, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  dated 2026-04-09 instead: %s\n", got.Number)

	fmt.Fprintln(out, "\na credit note for FY2026-27/0002:")
	of := sequence.Ref{Period: "FY2026-27", N: 2}
	cn, err := put(notes, "c1", credits.Correcting(of), "2026-04-20", "Rossi", -45.5, "FY2026-27/0002")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s  %s  %-8s %7.2f  corrects %s\n", cn.Number, cn.Date, cn.Customer, cn.Total, cn.Corrects)
	_, err = put(notes, "c2", credits, "2026-04-21", "Rossi", -1, "")
	fmt.Fprintf(out, "  a credit note that names no invoice is refused: %v\n", errors.Is(err, sequence.ErrCorrectionNeeded))
	_, err = put(notes, "c3", credits.Correcting(sequence.Ref{Period: "FY2026-27", N: 9}), "2026-04-21", "Rossi", -1, "")
	fmt.Fprintf(out, "  so is one for an invoice never issued (FY2026-27/0009): %v\n", errors.Is(err, sequence.ErrNotIssued))

	fmt.Fprintln(out, "\nthe audit shows the pair on both sides:")
	april := time.Date(2026, time.April, 20, 12, 0, 0, 0, rome)
	rep, err := invoices.At(april).Audit(ctx)
	if err != nil {
		return err
	}
	// Both numbers are of fiscal year 2026-27: handles dated in it render them.
	inv, cns := invoices.At(april), credits.At(april)
	for _, c := range rep.CorrectedBy {
		fmt.Fprintf(out, "  invoices %s: %s is corrected by %s %s\n", rep.Period, inv.Format(c.Of.N), c.By.Series, cns.Format(c.By.N))
	}
	rep, err = credits.At(april).Audit(ctx)
	if err != nil {
		return err
	}
	for _, c := range rep.Corrections {
		fmt.Fprintf(out, "  credit-notes %s: %s corrects %s %s (%s)\n", rep.Period, cns.Format(c.By.N), c.Of.Series, inv.Format(c.Of.N), c.Of)
	}

	fmt.Fprintln(out, "\nthe series of the vault:")
	infos, err := books.Series(ctx)
	if err != nil {
		return err
	}
	for _, s := range infos {
		state := "open"
		if s.Closed {
			state = "closed"
		}
		fmt.Fprintf(out, "  %-13s %s  head %d  %s\n", s.Name, s.Period, s.Head, state)
	}
	return nil
}
