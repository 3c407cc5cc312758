package main

import (
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

// seqFlags are the flags that pick a counter and how it renders.
type seqFlags struct {
	partition string
	format    string
}

func (f *seqFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.partition, "partition", "", "partition tuple, comma-separated (e.g. 2026,EU): each tuple counts from 1")
	cmd.Flags().StringVar(&f.format, "format", "", "render numbers with a format: {seq}, {seq:04}, {partition.0}, …")
}

// parts splits --partition; integers and their decimal text are the same
// component to the sequence package, so every component is passed as text.
func (f *seqFlags) parts() []any {
	if f.partition == "" {
		return nil
	}
	var out []any
	for p := range strings.SplitSeq(f.partition, ",") {
		out = append(out, strings.TrimSpace(p))
	}
	return out
}

// partStrings is parts as the text a listing of series shows.
func (f *seqFlags) partStrings() []string {
	var out []string
	for _, p := range f.parts() {
		out = append(out, p.(string))
	}
	return out
}

func (f *seqFlags) sequence(v *vault.Vault, series string) (*sequence.Sequence, error) {
	return v.Sequence(series, sequence.Options{Partition: f.parts(), Format: f.format})
}

// serialJSON is a number as --json prints it.
type serialJSON struct {
	Series    string   `json:"series"`
	Partition []string `json:"partition,omitempty"`
	Number    uint64   `json:"number"`
	Formatted string   `json:"formatted"`
}

func (a *app) seqCmd() *cobra.Command {
	seq := &cobra.Command{
		Use:   "seq",
		Short: "Gap-free numbered series: next, peek, seed, void, audit, list",
		Long: `Gap-free numbered series. Each SERIES (optionally scoped by --partition)
counts 1, 2, 3 … with no number skipped or issued twice, even with many
callers at once. --format renders numbers: '{partition.0}/{seq:04}' gives
2026/0001 for --partition 2026.

The format is not stored with the series: pass --format each time you want
numbers rendered. To number a record in the same commit as its write, use
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
		Long: `Take the next number of SERIES and print it (formatted with --format).
A new series starts at 1. The allocation is recorded in the ledger.`,
		Example: `  noydb seq next fatture --partition 2026 --format '{partition.0}/{seq:04}'
  noydb seq next tickets --json`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := nf.sequence(v, args[0])
			if err != nil {
				return err
			}
			serial, err := s.NextSerial(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(serialJSON{s.Series(), s.Partition(), serial.N, serial.Formatted})
			}
			_, err = fmt.Fprintln(a.io.out, serial.Formatted)
			return err
		},
	}
	nf.add(next)

	var pf seqFlags
	peek := &cobra.Command{
		Use:   "peek SERIES",
		Short: "Print the last number a series handed out",
		Long: `Print the last number SERIES handed out (for a series numbered by
'noydb number' passes, the last number a pass gave). It never writes and
works on every store. A series the vault does not hold is an error naming
the closest series it does hold.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			s, err := pf.sequence(v, args[0])
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
			n, err := s.Peek(cmd.Context())
			if err != nil {
				return err
			}
			formatted := ""
			if n > 0 {
				formatted = s.Format(n)
			}
			if a.json {
				return a.printJSON(serialJSON{s.Series(), s.Partition(), n, formatted})
			}
			if pf.format != "" && n > 0 {
				_, err = fmt.Fprintf(a.io.out, "%d\t%s\n", n, formatted)
			} else {
				_, err = fmt.Fprintln(a.io.out, n)
			}
			return err
		},
	}
	pf.add(peek)

	var sf seqFlags
	seed := &cobra.Command{
		Use:   "seed SERIES N",
		Short: "Move a series forward so the next number is N+1",
		Long: `Move SERIES forward so that its next number is N+1, for example after
importing records that already carry numbers up to N. It never moves a series
back: at N or beyond it does nothing, and says so ("SERIES is already at M:
nothing to do"). It prints "SERIES: next number is N+1", or with --json
{"series", "partition", "seeded", "head", "next"}.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNumber(seedWhat, args[1])
			if err != nil {
				return err
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := sf.sequence(v, args[0])
			if err != nil {
				return err
			}
			// SeedTo says nothing of what it did: the head read first tells
			// a seed that moves the series from one that would not.
			head, err := s.Peek(cmd.Context())
			if err != nil {
				return err
			}
			seeded := head < n
			if seeded {
				if err := s.SeedTo(cmd.Context(), n); err != nil {
					return err
				}
				// Read back: another writer may have moved it further since.
				if head, err = s.Peek(cmd.Context()); err != nil {
					return err
				}
			}
			if a.json {
				return a.printJSON(seedJSON{s.Series(), s.Partition(), seeded, head, head + 1})
			}
			if seeded {
				_, err = fmt.Fprintf(a.io.out, "%s: next number is %d\n", seriesLabel(s), head+1)
			} else {
				_, err = fmt.Fprintf(a.io.out, "%s is already at %d: nothing to do\n", seriesLabel(s), head)
			}
			return err
		},
	}
	sf.add(seed)
	describeNumber(seed, seedWhat)

	var vf seqFlags
	var reason string
	void := &cobra.Command{
		Use:   "void SERIES N --reason TEXT",
		Short: "Mark an issued number as void, with a reason",
		Long: `Mark the issued number N of SERIES as void (a cancelled invoice, a spoiled
ticket), so an audit tells it from a missing one. The number stays taken.
It prints "voided SERIES N", or with --json {"series", "partition", "number",
"formatted", "reason"}.`,
		Example: `  noydb seq void fatture 7 --partition 2026 --reason "cancelled by the customer"`,
		Args:    exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := parseNumber(voidWhat, args[1])
			if err != nil {
				return err
			}
			if reason == "" {
				return usagef("--reason is required: say why the number is void")
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := vf.sequence(v, args[0])
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
	describeNumber(void, voidWhat)
	void.Flags().StringVar(&reason, "reason", "", "why the number is void (required)")

	seq.AddCommand(next, peek, seed, void, a.auditCmd(), a.seqListCmd())
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
