package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// What the positional number of seed and void is, in their messages.
const (
	seedWhat = "the number to seed to"
	voidWhat = "the number to void"
)

// serialJSON is a number as --json prints it.
type serialJSON struct {
	Series    string   `json:"series"`
	Partition []string `json:"partition,omitempty"`
	Number    uint64   `json:"number"`
	Formatted string   `json:"formatted"`
	Period    string   `json:"period,omitempty"`
}

func (a *app) seqCmd() *cobra.Command {
	seq := &cobra.Command{
		Use:   "seq",
		Short: "Gap-free numbered series: create, next, peek, seed, void, audit, close-period, list",
		Long: `Gap-free numbered series. Each SERIES (optionally scoped by --partition)
counts 1, 2, 3 … with no number skipped or issued twice, even with many
callers at once. --format renders numbers: '{partition.0}/{seq:04}' gives
2026/0001 for --partition 2026.

A series' definition (--format, --period, --fiscal-start, --tz, --meta,
--corrects) is stored with the series by 'seq create' or by the first
number taken with any of them, so later commands may leave them out: every
command, process and device then numbers and renders the series the same
way. Passing a different definition later is refused. 'noydb seq list'
shows it. A series the vault has never seen is refused as a typo ("no such
series … did you mean invoices?") unless it was created with 'seq create',
or the command gives its definition flags or --new.

With --period (day, month, year or fiscal-year) each period of the
document date (--date, default today, read in the series' --tz) counts
from 1: 'seq next invoices --period fiscal-year --fiscal-start 04-01 --tz
Europe/Rome --format FY{FY}/{seq:04} --date 2026-04-02' gives FY2026-27/0001.
A back-dated number goes into its own period while that period is open;
'seq close-period SERIES LABEL' closes one for good.

A series defined with --corrects INVOICES (credit notes) takes numbers only
with --correcting N (and --correcting-period LABEL): the ledger records
which invoice each corrects, and 'seq audit' shows the pairs.

To number a record in the same commit as its write, use
'noydb put --seq SERIES'.

Allocating (next, seed, void) needs a store with atomic compare-and-swap:
badger, mem or postgres. On file: stores use 'noydb number'.`,
		Args: a.noArgs,
		RunE: a.groupRun,
	}

	var nf seqFlags
	next := &cobra.Command{
		Use:   "next SERIES",
		Short: "Take the next number of a series and print it",
		Long: `Take the next number of SERIES and print it (formatted with the series'
format). A new series (created with 'seq create', its definition flags or
--new) or period starts at 1. The allocation is recorded in the ledger.
With --json it prints {"series", "partition", "number", "formatted",
"period"}.

For a series with periods the number is taken in the period of --date
(the document's date, default today) or in the one --period LABEL names
(FY2026-27: dated the period's first day). A number dated into a closed
period is refused. A credit note names the number it corrects with
--correcting: N, LABEL/N (FY2026-27/3) or the number as printed
(FY2026-27/0003).`,
		Example: `  noydb seq next fatture --partition 2026 --format '{partition.0}/{seq:04}'
  noydb seq next invoices --period fiscal-year --fiscal-start 04-01 --tz Europe/Rome --format 'FY{FY}/{seq:04}' --date 2026-04-02
  noydb seq next invoices --period FY2026-27
  noydb seq next credit-notes --corrects invoices --correcting FY2026-27/0003
  noydb seq next tickets --json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.shortCommand()
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := a.seriesHandle(cmd.Context(), &nf, v, args[0])
			if err != nil {
				return err
			}
			serial, err := s.NextSerial(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(serialJSON{s.Series(), s.Partition(), serial.N, serial.Formatted, serial.Period})
			}
			_, err = fmt.Fprintln(a.io.out, serial.Formatted)
			return err
		},
	}
	nf.add(next)
	nf.addPeriod(next, true, true, "to take the number in")
	nf.addDefine(next)
	nf.addNew(next, "the series")
	nf.addDate(next, "the document's date, which picks the period")
	nf.addCorrecting(next)

	var pf seqFlags
	peek := &cobra.Command{
		Use:   "peek SERIES",
		Short: "Print the last number a series handed out",
		Long: `Print the last number SERIES handed out (for a series numbered by
'noydb number' passes, the last number a pass gave). It never writes and
works on every store. A series the vault does not hold is an error naming
the closest series it does hold. For a series with periods it is the last
number of today's period, of --date's, or of --period LABEL's (which says
"closed" after the number when that period is closed). It prints the
number, and for a series with a format the number as printed after a tab
("5	FY2026-27/0005"); with --json {"series", "partition", "number",
"formatted", "period", "closed"}.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.shortCommand()
			if err := pf.checkPeriod(); err != nil {
				return err
			}
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			counter, passes, err := seriesOf(cmd.Context(), v, args[0], pf.partStrings())
			if err != nil {
				return err
			}
			if counter == nil {
				return a.peekPasses(*passes)
			}
			s, err := pf.sequence(cmd.Context(), v, args[0])
			if err != nil {
				return err
			}
			n, err := s.Peek(cmd.Context())
			if err != nil {
				return err
			}
			period, closed, err := periodOf(cmd.Context(), s)
			if err != nil {
				return err
			}
			formatted := ""
			if n > 0 {
				formatted = s.Format(n)
			}
			if a.json {
				return a.printJSON(peekJSON{serialJSON{s.Series(), s.Partition(), n, formatted, period}, closed})
			}
			line := strconv.FormatUint(n, 10)
			if n > 0 && formatted != line {
				line += "\t" + formatted
			}
			if closed {
				line += "\tclosed"
			}
			_, err = fmt.Fprintln(a.io.out, line)
			return err
		},
	}
	pf.add(peek)
	pf.addDate(peek, "show the period holding this date")
	pf.addPeriod(peek, false, true, "to show")

	var sf seqFlags
	seed := &cobra.Command{
		Use:   "seed SERIES N",
		Short: "Move a series forward so the next number is N+1",
		Long: `Move SERIES forward so that its next number is N+1, for example after
importing records that already carry numbers up to N. It never moves a series
back: at N or beyond it does nothing, and says so ("SERIES is already at M:
nothing to do"). It prints "SERIES: next number is N+1", or with --json
{"series", "partition", "period", "seeded", "head", "next"}.

For a series with periods (see 'seq next --period') it seeds one period:
today's, the one holding --date, or the one named by --period LABEL
(2026-03-15, 2026-03, 2026, FY2025-26 or FY2026, as 'seq list' shows
them). --period needs the series' definition stored (by its first 'seq
next' or 'put --seq' with --period): a series without periods, or a label
of another kind, is a usage error. A closed period cannot be seeded.`,
		Example: `  noydb seq seed orders 6
  noydb seq seed fatture 41 --partition 2026
  noydb seq seed invoices 2 --period FY2026-27`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNumber(seedWhat, args[1])
			if err != nil {
				return err
			}
			if err := sf.checkPeriod(); err != nil {
				return err
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := a.seriesHandle(cmd.Context(), &sf, v, args[0])
			if err != nil {
				return err
			}
			// SeedTo says nothing of what it did: the head read first tells
			// a seed that moves the series from one that would not.
			peek := func() (uint64, error) { return s.Peek(cmd.Context()) }
			seedTo := func() error { return s.SeedTo(cmd.Context(), n) }
			label := seriesLabel(s)
			period := sf.periodLabel()
			if period != "" {
				// PeekPeriod checks the label and that the series has
				// periods (a *ValidationError: exit 2) before any write.
				peek = func() (uint64, error) {
					head, _, err := s.PeekPeriod(cmd.Context(), period)
					return head, err
				}
				seedTo = func() error { return s.SeedPeriod(cmd.Context(), period, n) }
				label += " period " + period
			}
			head, err := peek()
			if err != nil {
				return err
			}
			seeded := head < n
			if seeded {
				if err := seedTo(); err != nil {
					return err
				}
				// Read back: another writer may have moved it further since.
				if head, err = peek(); err != nil {
					return err
				}
			}
			if a.json {
				return a.printJSON(seedJSON{s.Series(), s.Partition(), period, seeded, head, head + 1})
			}
			if seeded {
				_, err = fmt.Fprintf(a.io.out, "%s: next number is %d\n", label, head+1)
			} else {
				_, err = fmt.Fprintf(a.io.out, "%s is already at %d: nothing to do\n", label, head)
			}
			return err
		},
	}
	sf.add(seed)
	sf.addNew(seed, "the series")
	sf.addDate(seed, "seed the period holding this date")
	sf.addPeriod(seed, false, true, "to seed")
	describeNumber(seed, seedWhat)

	var vf seqFlags
	var reason string
	void := &cobra.Command{
		Use:   "void SERIES N --reason TEXT",
		Short: "Mark an issued number as void, with a reason",
		Long: `Mark the issued number N of SERIES as void (a cancelled invoice, a spoiled
ticket), so an audit tells it from a missing one. The number stays taken.
N is the number, or the number as printed (FY2026-27/0003), or LABEL/N
(FY2026-27/3); for a series with periods, a plain N is of today's period,
of --date's or of --period LABEL's. It prints "voided SERIES N", or with
--json {"series", "partition", "number", "formatted", "reason"}.`,
		Example: `  noydb seq void fatture 7 --partition 2026 --reason "cancelled by the customer"
  noydb seq void invoices FY2026-27/0003 --reason "issued twice by mistake"
  noydb seq void invoices 3 --period FY2026-27 --reason "issued twice by mistake"`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := vf.checkPeriod(); err != nil {
				return err
			}
			if reason == "" {
				return usagef("--reason is required: say why the number is void")
			}
			if strings.HasPrefix(args[1], "-") {
				return badNumber(voidWhat, args[1])
			}
			if allDigits(args[1]) {
				if _, err := parseNumber(voidWhat, args[1]); err != nil {
					return err
				}
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := a.seriesHandle(cmd.Context(), &vf, v, args[0])
			if err != nil {
				return err
			}
			s, n, err := a.numberIn(cmd.Context(), v, &vf, s, args[1], voidWhat)
			if err != nil {
				return err
			}
			if err := s.Void(cmd.Context(), n, reason); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(voidJSON{s.Series(), s.Partition(), n, s.Format(n), reason})
			}
			_, err = fmt.Fprintf(a.io.out, "voided %s %s\n", seriesLabel(s), s.Format(n))
			return err
		},
	}
	vf.add(void)
	vf.addDate(void, "void a number of the period holding this date")
	vf.addPeriod(void, false, true, "of the number")
	describeNumber(void, voidWhat)
	void.Flags().StringVar(&reason, "reason", "", "why the number is void (required)")

	seq.AddCommand(a.seqCreateCmd(), next, peek, seed, void, a.auditCmd(), a.closePeriodCmd(), a.seqListCmd())
	return seq
}

// peekPasses prints the last number of a series numbered by passes, in its
// stored format.
func (a *app) peekPasses(s vault.SeriesInfo) error {
	formatted := strconv.FormatUint(s.Head, 10)
	if s.Format != "" && s.Head > 0 {
		f, err := sequence.ParseFormat(s.Format)
		if err != nil {
			return err
		}
		formatted = f.Format(s.Head)
	}
	if a.json {
		return a.printJSON(serialJSON{Series: s.Name, Number: s.Head, Formatted: formatted})
	}
	if formatted != strconv.FormatUint(s.Head, 10) {
		_, err := fmt.Fprintf(a.io.out, "%d\t%s\n", s.Head, formatted)
		return err
	}
	_, err := fmt.Fprintln(a.io.out, s.Head)
	return err
}

// peekJSON is what 'seq peek --json' prints.
type peekJSON struct {
	serialJSON
	Closed bool `json:"closed,omitempty"`
}

// periodOf is the label of the period s acts on and whether it is closed
// ("" and false for a series without periods).
func periodOf(ctx context.Context, s *sequence.Sequence) (string, bool, error) {
	label, err := s.PeriodLabel(ctx)
	if err != nil || label == "" {
		return "", false, err
	}
	_, closed, err := s.PeekPeriod(ctx, label)
	return label, closed, err
}

func (a *app) closePeriodCmd() *cobra.Command {
	var f seqFlags
	var yes bool
	cmd := &cobra.Command{
		Use:   "close-period SERIES [LABEL]",
		Short: "Close a period of a series: no number can be dated into it any more",
		Long: `Close a period of SERIES for good, named by LABEL or --period LABEL
(2026-03-15, 2026-03, 2026, FY2025-26 or FY2026, as 'seq list' shows them),
or by a --date in it: afterwards a number dated into it is refused, while
other periods, earlier ones included, stay open. The close is recorded in
the ledger with the period's last number. It prints "closed SERIES LABEL:
last number N", or with --json {"series", "partition", "period", "head",
"closed", "already_closed"}. A period closed before is left as it is, and
the command says so. A series never used takes its definition flags here.

A period that has not begun yet, or in which the series has no number, is
most likely a typo: closing it asks for confirmation on a terminal, and
elsewhere needs --yes.`,
		Example: `  noydb seq close-period invoices FY2025-26
  noydb seq close-period invoices --date 2026-03-31
  noydb seq close-period invoices FY2030-31 --yes`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if _, err := f.options(); err != nil {
				return err
			}
			label := f.periodLabel()
			if len(args) == 2 {
				if label != "" && label != args[1] {
					return usagef("the period is named twice, %s and --period %s: give one", args[1], label)
				}
				if f.date != "" {
					return usagef("the period is named twice, %s and --date: give one", args[1])
				}
				label = args[1]
			}
			if label == "" && f.date == "" {
				return usagef("name the period to close: LABEL, --period LABEL (as 'noydb seq list' shows them) or a --date in it")
			}
			period := f.period
			if f.periodKind() == "" {
				f.period = "" // the label is not passed on as a handle's period
			}
			v, err := a.openVault(ctx)
			if err != nil {
				return err
			}
			s, err := a.seriesHandle(ctx, &f, v, args[0])
			f.period = period
			if err != nil {
				return err
			}
			if label == "" {
				if label, err = s.PeriodLabel(ctx); err != nil {
					return err
				}
				if label == "" {
					return usagef("series %s has no periods: there is nothing to close", args[0])
				}
			}
			head, closed, err := s.PeekPeriod(ctx, label)
			if err != nil {
				return err
			}
			already := closed
			if !closed {
				if err := a.confirmClose(ctx, v, &f, s, label, head, yes); err != nil {
					return err
				}
				if err := s.ClosePeriod(ctx, label); err != nil {
					return err
				}
				if head, closed, err = s.PeekPeriod(ctx, label); err != nil {
					return err
				}
			}
			if a.json {
				return a.printJSON(struct {
					Series        string   `json:"series"`
					Partition     []string `json:"partition,omitempty"`
					Period        string   `json:"period"`
					Head          uint64   `json:"head"`
					Closed        bool     `json:"closed"`
					AlreadyClosed bool     `json:"already_closed"`
				}{s.Series(), s.Partition(), label, head, closed, already})
			}
			if already {
				_, err = fmt.Fprintf(a.io.out, "%s %s was closed already: last number %d; nothing to do\n", seriesLabel(s), label, head)
			} else {
				_, err = fmt.Fprintf(a.io.out, "closed %s %s: last number %d\n", seriesLabel(s), label, head)
			}
			return err
		},
	}
	f.add(cmd)
	f.addPeriod(cmd, true, true, "to close")
	f.addDate(cmd, "close the period holding this date")
	f.addDefine(cmd)
	f.addNew(cmd, "the series")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "close a period that has not begun or has no number without asking")
	return cmd
}
