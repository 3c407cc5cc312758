package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/ledger"
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

// auditRow is one number, or a run of seeded or missing numbers (To > Number).
type auditRow struct {
	Number     uint64 `json:"number"`
	To         uint64 `json:"to,omitempty"`
	Formatted  string `json:"formatted"`
	Status     string `json:"status"`
	Collection string `json:"collection,omitempty"`
	ID         string `json:"id,omitempty"`
	Deleted    bool   `json:"deleted,omitempty"`
	Renumbered bool   `json:"renumbered,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// auditReport is what 'seq audit' prints.
type auditReport struct {
	Series    string         `json:"series"`
	Partition []string       `json:"partition,omitempty"`
	Head      uint64         `json:"head"`
	Numbers   []auditRow     `json:"numbers"`
	Counts    map[string]int `json:"counts"`
}

func (a *app) auditCmd() *cobra.Command {
	var f seqFlags
	cmd := &cobra.Command{
		Use:   "audit SERIES",
		Short: "Account for every number a series handed out",
		Long: `Account for every number from 1 to the head of SERIES:
  bound     a record carries it (and which one; "deleted since" when the record
            was deleted, "renumbered since" when it took another number later)
  voided    voided, with the reason
  unbound   taken (by 'seq next') but no record carries it
  seeded    skipped over by 'seq seed' (numbered elsewhere, then imported)
  missing   the ledger has no trace of it

The answer comes from the vault's ledger, which is verified on the way: a
tampered ledger fails the audit. Exit status 1 when a number is missing.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVault(cmd.Context(), false)
			if err != nil {
				return err
			}
			s, err := f.sequence(v, args[0])
			if err != nil {
				return err
			}
			rep, err := auditFromLedger(cmd.Context(), v, s)
			if err != nil {
				return err
			}
			if a.json {
				err = a.printJSON(rep)
			} else {
				err = a.printAudit(rep, s)
			}
			if err != nil {
				return err
			}
			if m := rep.Counts[statusMissing]; m > 0 {
				return fmt.Errorf("audit %s: %d of %d numbers have no trace in the ledger (a crash between counter and ledger?)", seriesName(s), m, rep.Head)
			}
			return nil
		},
	}
	f.add(cmd)
	return cmd
}

// auditFromLedger builds the audit of s from the vault's ledger entries:
// NumberAllocated, SeriesSeeded and NumberVoided of the series, and the
// RecordPut / NumberAssigned entries that carry one of its numbers.
func auditFromLedger(ctx context.Context, v *vault.Vault, s *sequence.Sequence) (auditReport, error) {
	head, err := s.Peek(ctx)
	if err != nil {
		return auditReport{}, err
	}
	type binding struct {
		collection, id string
	}
	var (
		allocated  = map[uint64]bool{}
		voided     = map[uint64]string{}
		bound      = map[uint64]binding{}
		byRecord   = map[binding][]uint64{}
		deleted    = map[binding]bool{}
		renumbered = map[uint64]bool{} // bound to a record that later took another number
		seeded     [][2]uint64         // (from, to]: numbers skipped by a seed
	)
	part := s.Partition()
	for e, err := range v.Ledger().Read(ctx, 1) {
		if err != nil {
			return auditReport{}, fmt.Errorf("audit %s: read ledger: %w", seriesName(s), err)
		}
		rec := binding{e.Collection, e.ID}
		switch e.Kind {
		case ledger.RecordDelete:
			if _, ok := byRecord[rec]; ok {
				deleted[rec] = true
			}
			continue
		case ledger.RecordPut:
			if e.Number == 0 {
				delete(deleted, rec)
				continue
			}
		}
		if e.Series != s.Series() || !slices.Equal(e.Partition, part) {
			continue
		}
		switch e.Kind {
		case ledger.NumberAllocated:
			allocated[e.Number] = true
		case ledger.SeriesSeeded:
			if e.Number > e.From {
				seeded = append(seeded, [2]uint64{e.From, e.Number})
			}
		case ledger.NumberVoided:
			voided[e.Number] = e.Reason
		case ledger.RecordPut, ledger.NumberAssigned:
			for _, n := range byRecord[rec] {
				if n != e.Number {
					renumbered[n] = true
				}
			}
			bound[e.Number] = rec
			byRecord[rec] = append(byRecord[rec], e.Number)
			delete(deleted, rec)
		}
	}
	// Numbers the ledger says something about, in order: between two of them
	// every number is seeded or missing, so a run is classified in one step.
	known := make([]uint64, 0, len(allocated)+len(voided)+len(bound))
	for n := range allocated {
		known = append(known, n)
	}
	for n := range voided {
		known = append(known, n)
	}
	for n := range bound {
		known = append(known, n)
	}
	slices.Sort(known)
	known = slices.Compact(known)
	// seededRun returns the last number of the seeded run that n starts, or 0.
	seededRun := func(n uint64) uint64 {
		end := uint64(0)
		for _, r := range seeded {
			if n > r[0] && n <= r[1] {
				end = max(end, r[1])
			}
		}
		return end
	}
	// nextSeeded returns the first seeded number above n, or 0.
	nextSeeded := func(n uint64) uint64 {
		first := uint64(0)
		for _, r := range seeded {
			if r[0] >= n && (first == 0 || r[0]+1 < first) {
				first = r[0] + 1
			}
		}
		return first
	}
	rep := auditReport{Series: s.Series(), Partition: part, Head: head, Numbers: []auditRow{}, Counts: map[string]int{
		statusBound: 0, statusVoided: 0, statusUnbound: 0, statusSeeded: 0, statusMissing: 0,
	}}
	for n := uint64(1); n <= head && n != 0; n++ {
		row := auditRow{Number: n, Formatted: s.Format(n)}
		b, isBound := bound[n]
		if isBound {
			row.Collection, row.ID, row.Deleted, row.Renumbered = b.collection, b.id, deleted[b], renumbered[n]
		}
		reason, isVoided := voided[n]
		switch {
		case isVoided:
			row.Status, row.Reason = statusVoided, reason
		case isBound:
			row.Status = statusBound
		case allocated[n]:
			row.Status = statusUnbound
		default:
			// A run up to the next number the ledger names (a seed can skip millions).
			end := head
			if i, _ := slices.BinarySearch(known, n); i < len(known) {
				end = min(end, known[i]-1)
			}
			if e := seededRun(n); e > 0 {
				row.Status, end = statusSeeded, min(end, e)
			} else {
				row.Status = statusMissing
				if f := nextSeeded(n); f > 0 {
					end = min(end, f-1)
				}
			}
			if end > n {
				row.To = end
			}
			rep.Counts[row.Status] += int(end - n + 1)
			rep.Numbers = append(rep.Numbers, row)
			n = end
			continue
		}
		rep.Counts[row.Status]++
		rep.Numbers = append(rep.Numbers, row)
	}
	return rep, nil
}

func (a *app) printAudit(rep auditReport, s *sequence.Sequence) error {
	fmt.Fprintf(a.io.out, "series %s in vault %q: head %d\n", seriesName(s), a.vaultName, rep.Head)
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
		if r.Renumbered {
			detail += " (renumbered since)"
		}
		if r.Deleted {
			detail += " (deleted since)"
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
	_, err := fmt.Fprintf(a.io.out, "%d numbers: %s\n", rep.Head, strings.Join(parts, ", "))
	return err
}

// seriesName is a series with its partition, for messages: "fatture" [2026, EU].
func seriesName(s *sequence.Sequence) string {
	name := strconv.Quote(s.Series())
	if p := s.Partition(); len(p) > 0 {
		name += " [" + strings.Join(p, ", ") + "]"
	}
	return name
}
