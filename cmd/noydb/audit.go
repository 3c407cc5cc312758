package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// What an audit says about a number.
const (
	statusBound   = "bound"   // a record carries it
	statusVoided  = "voided"  // voided, with a reason
	statusUnbound = "unbound" // taken (seq next), no record carries it
	statusSeeded  = "seeded"  // skipped over by a seed (numbers imported from elsewhere)
	statusMissing = "missing" // at or below the head, but the ledger does not mention it
)

// auditRow is one number, or a run of unbound, seeded or missing numbers (To > Number).
type auditRow struct {
	Number     uint64 `json:"number"`
	To         uint64 `json:"to,omitempty"`
	Formatted  string `json:"formatted"`
	Status     string `json:"status"`
	Collection string `json:"collection,omitempty"`
	ID         string `json:"id,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// auditReport is what 'seq audit' prints.
type auditReport struct {
	Series      string         `json:"series"`
	Partition   []string       `json:"partition,omitempty"`
	Period      string         `json:"period,omitempty"`
	Head        uint64         `json:"head"`
	Numbers     []auditRow     `json:"numbers"`
	Counts      map[string]int `json:"counts"`
	Corrections []pairJSON     `json:"corrections,omitempty"`
	CorrectedBy []pairJSON     `json:"corrected_by,omitempty"`
}

// pairJSON is a correction: number of this series, and the other's.
type pairJSON struct {
	Number uint64  `json:"number"`
	Other  refJSON `json:"other"`
}

// refJSON is a number of a series.
type refJSON struct {
	Series    string   `json:"series"`
	Partition []string `json:"partition,omitempty"`
	Period    string   `json:"period,omitempty"`
	Number    uint64   `json:"number"`
}

func refOf(r sequence.Ref) refJSON { return refJSON{r.Series, r.Partition, r.Period, r.N} }

func (a *app) auditCmd() *cobra.Command {
	var f seqFlags
	cmd := &cobra.Command{
		Use:   "audit SERIES",
		Short: "Account for every number a series handed out",
		Long: `Account for every number from 1 to the head of SERIES:
  bound     a record was written carrying it (the last one, if several were)
  voided    voided, with the reason
  unbound   taken (by 'seq next') but no record carries it
  seeded    skipped over by 'seq seed' (numbered elsewhere, then imported)
  missing   the ledger has no trace of it

then the corrections: the numbers of a credit-note series (--corrects) with
the number each corrects, or the numbers of a corrected series with the
credit notes that correct them. For a series with periods it audits
every period the series has numbers in, one after the other (with --json,
an array of reports), or the one of --date or --period LABEL.

The answer comes from the vault's ledger, which is verified on the way: a
tampered ledger fails the audit. Exit status 1 when a number is missing.

For a series numbered by 'noydb number' passes it prints how many of its
numbers the ledger shows assigned, voided or not yet recorded (a batch a
stopped pass has not finished), and every record given two numbers or
number given to two records (exit status 1).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.checkPeriod(); err != nil {
				return err
			}
			ctx := cmd.Context()
			v, err := a.openVaultToRead(ctx)
			if err != nil {
				return err
			}
			counter, passes, err := seriesOf(ctx, v, args[0], f.partStrings())
			if err != nil {
				return err
			}
			if counter == nil {
				return a.auditPasses(ctx, v, *passes)
			}
			s, err := f.sequence(ctx, v, args[0])
			if err != nil {
				return err
			}
			handles := []*sequence.Sequence{s}
			all := false
			if f.periodLabel() == "" && f.date == "" {
				if periods, err := periodsOf(ctx, v, s); err != nil {
					return err
				} else if len(periods) > 0 {
					handles, all = periods, true
				}
			}
			var reps []auditReport
			missing, head := 0, uint64(0)
			for i, h := range handles {
				r, err := h.Audit(ctx)
				if err != nil {
					return err
				}
				rep := auditOf(h, r)
				reps = append(reps, rep)
				missing += rep.Counts[statusMissing]
				head += rep.Head
				if a.json {
					continue
				}
				if i > 0 {
					fmt.Fprintln(a.io.out)
				}
				if err := a.printAudit(rep, h); err != nil {
					return err
				}
			}
			if a.json && all {
				err = a.printJSON(reps)
			} else if a.json {
				err = a.printJSON(reps[0])
			}
			if err != nil {
				return err
			}
			if missing > 0 {
				return fmt.Errorf("audit %s: %d of %d numbers have no trace in the ledger (a crash between counter and ledger?)", seriesName(s), missing, head)
			}
			return nil
		},
	}
	f.add(cmd)
	f.addDate(cmd, "audit the period holding this date")
	f.addPeriod(cmd, false, true, "to audit (default: every period)")
	return cmd
}

// periodsOf returns the handles of every period of s's series and
// partition that has a counter, in the order 'seq list' shows them; none
// for a series without periods.
func periodsOf(ctx context.Context, v *vault.Vault, s *sequence.Sequence) ([]*sequence.Sequence, error) {
	def, err := s.Definition(ctx)
	if err != nil || def.Period == sequence.PeriodNone {
		return nil, err
	}
	infos, err := v.SeriesNamed(ctx, s.Series())
	if err != nil {
		return nil, err
	}
	var out []*sequence.Sequence
	for _, info := range infos {
		if info.Passes || info.Period == "" || !slices.Equal(info.Partition, s.Partition()) {
			continue
		}
		t, err := atLabel(ctx, s, info.Period)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// auditOf turns the SDK's audit of s into the rows the command prints: one
// per run of the report, so a bound or voided number is a row of its own and
// a run of unbound, seeded or missing numbers (a seed can skip millions) is
// one row.
func auditOf(s *sequence.Sequence, r sequence.AuditReport) auditReport {
	rep := auditReport{Series: r.Series, Partition: r.Partition, Period: r.Period, Head: r.Head, Numbers: make([]auditRow, 0, len(r.Runs)), Counts: map[string]int{
		statusBound: r.Bound, statusVoided: r.Voided, statusUnbound: r.Unbound, statusSeeded: r.Seeded, statusMissing: r.Missing,
	}}
	for _, run := range r.Runs {
		row := auditRow{Number: run.From, Formatted: s.Format(run.From), Status: run.State.String(),
			Collection: run.Collection, ID: run.ID, Reason: run.Reason}
		if run.To > run.From {
			row.To = run.To
		}
		rep.Numbers = append(rep.Numbers, row)
	}
	for _, c := range r.Corrections {
		rep.Corrections = append(rep.Corrections, pairJSON{c.By.N, refOf(c.Of)})
	}
	for _, c := range r.CorrectedBy {
		rep.CorrectedBy = append(rep.CorrectedBy, pairJSON{c.Of.N, refOf(c.By)})
	}
	return rep
}

func (a *app) printAudit(rep auditReport, s *sequence.Sequence) error {
	period := ""
	if rep.Period != "" {
		period = " period " + rep.Period
	}
	fmt.Fprintf(a.io.out, "series %s%s in vault %q: head %d\n", seriesName(s), period, a.vaultName, rep.Head)
	tw := tabwriter.NewWriter(a.io.out, 0, 4, 2, ' ', 0)
	for _, r := range rep.Numbers {
		num, formatted := strconv.FormatUint(r.Number, 10), r.Formatted
		if r.To > r.Number {
			num += "-" + strconv.FormatUint(r.To, 10)
			formatted += " … " + s.Format(r.To)
		}
		detail := ""
		switch r.Status {
		case statusBound:
			detail = r.Collection + "/" + r.ID
		case statusVoided:
			detail = strconv.Quote(r.Reason)
			if r.ID != "" {
				detail += " (" + r.Collection + "/" + r.ID + ")"
			}
		case statusUnbound:
			detail = "taken, no record carries it"
		case statusSeeded:
			detail = "skipped by a seed (numbered elsewhere)"
		case statusMissing:
			detail = "no trace in the ledger"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", num, formatted, r.Status, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var parts []string
	for _, st := range []string{statusBound, statusVoided, statusUnbound, statusSeeded, statusMissing} {
		parts = append(parts, fmt.Sprintf("%d %s", rep.Counts[st], st))
	}
	if _, err := fmt.Fprintf(a.io.out, "%d numbers: %s\n", rep.Head, strings.Join(parts, ", ")); err != nil {
		return err
	}
	for _, c := range rep.Corrections {
		fmt.Fprintf(a.io.out, "  %s corrects %s\n", s.Format(c.Number), refText(c.Other))
	}
	for _, c := range rep.CorrectedBy {
		fmt.Fprintf(a.io.out, "  %s is corrected by %s\n", s.Format(c.Number), refText(c.Other))
	}
	return nil
}

// refText is a number of a series as the audit prints it: invoices FY2026-27 3.
func refText(r refJSON) string {
	t := r.Series
	if len(r.Partition) > 0 {
		t += " " + strings.Join(r.Partition, ",")
	}
	if r.Period != "" {
		t += " " + r.Period
	}
	return t + " number " + strconv.FormatUint(r.Number, 10)
}

// seriesName is a series with its partition, for messages: "fatture" [2026, EU].
func seriesName(s *sequence.Sequence) string {
	name := strconv.Quote(s.Series())
	if p := s.Partition(); len(p) > 0 {
		name += " [" + strings.Join(p, ", ") + "]"
	}
	return name
}

// auditPasses audits a series numbered by passes, through the numbered
// handle of the collection it numbers.
// A series whose records were only enqueued ('number enqueue') has no
// collection stored until its first pass: nothing of it is numbered yet.
func (a *app) auditPasses(ctx context.Context, v *vault.Vault, info vault.SeriesInfo) error {
	rep := numbering.AuditReport{Series: info.Name, Last: info.Head}
	var err error
	if info.Collection != "" {
		h, herr := cliNumbering(v, info.Collection, info.Name, "", "number")
		if herr != nil {
			return herr
		}
		rep, err = h.Series().Audit(ctx)
		if err != nil && !errors.Is(err, numbering.ErrDuplicate) {
			return err
		}
	}
	if a.json {
		if err := a.printJSON(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.io.out, "series %q in vault %q, numbered by passes%s: last %d\n", info.Name, v.Name(), collectionNote(info.Collection), rep.Last)
		fmt.Fprintf(a.io.out, "%d numbers: %d assigned, %d voided, %d not yet recorded\n", rep.Last, rep.Assigned, rep.Voided, rep.Missing)
		for _, r := range rep.Renumbered {
			fmt.Fprintf(a.io.out, "  record %s has several numbers: %v\n", r.RecordID, r.Numbers)
		}
		for _, n := range rep.Reused {
			fmt.Fprintf(a.io.out, "  number %d was given to several records\n", n)
		}
	}
	if err != nil {
		return fmt.Errorf("audit %q: %w", info.Name, err)
	}
	return nil
}

// collectionNote is " (collection C)", or "" while a series numbered by
// passes has no collection stored yet.
func collectionNote(collection string) string {
	if collection == "" {
		return ""
	}
	return " (collection " + collection + ")"
}
