package main

import "github.com/spf13/cobra"

// formatsTopic is 'noydb help formats': the tokens of --format, which the
// flag's own help can only hint at.
func formatsTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "formats",
		Short: "The tokens of --format: how numbers are printed",
		Long: `--format renders a series' numbers (seq create, seq next, put --seq,
number pass). It is literal text with these tokens:

  {seq}          the number: 7
  {seq:0N}       the number zero-padded to N digits (1 to 20): {seq:04} is
                 0007; a wider number is not cut
  {partition.i}  component i (from 0) of --partition: {partition.0} of
                 --partition 2026,EU is 2026
  {meta.KEY}     the series' --meta KEY=VALUE
  {YYYY} {YY}    the document date's year: 2026, 26
  {MM} {DD}      its month and day: 04, 02
  {DOY}          its day of the year, 001 to 366
  {WW}           its ISO 8601 week, 01 to 53 (of the ISO year)
  {FY}           the fiscal year holding the date: 2026 when it starts on
                 1 January, 2026-27 when it spans two years (--fiscal-start)
  {FY_START}     the calendar year the fiscal year starts in: 2026
  {FY_END}       the calendar year it ends in: 2027
  {TFY}          the fiscal year in two digits: 26, or 26-27

Date tokens read the document's date (--date, default today) in the
series' --tz. There is no {period} token: a period's label is one of the
date tokens above ({FY} for --period fiscal-year, {YYYY} for year,
{YYYY}-{MM} for month). Braces only mark tokens and cannot be escaped.

The format is stored with the series by 'seq create' or its first number;
later commands may leave it out, and another one is refused.

Examples:
  {seq:05}                   00042
  INV-{YYYY}-{seq:04}        INV-2026-0042
  FY{FY}/{seq:04}            FY2026-27/0042 (--period fiscal-year
                             --fiscal-start 04-01)
  {partition.0}/{seq:04}     2026/0042 (--partition 2026)
  {meta.code}-{TFY}-{seq}    AB12-26-27-42 (--meta code=AB12)`,
	}
}
