package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/vault"
)

// numberFlags pick the collection a deferred series numbers and how.
type numberFlags struct {
	collection string
	field      string
	format     string
}

// add adds --collection, and with stamping (for a pass) --field and --format.
func (f *numberFlags) add(cmd *cobra.Command, stamping bool) {
	f.field = "number"
	cmd.Flags().StringVar(&f.collection, "collection", "", "collection whose records the series numbers (default: the series name)")
	if stamping {
		cmd.Flags().StringVar(&f.field, "field", "number", "JSON field of each record that receives its number")
		cmd.Flags().StringVar(&f.format, "format", "", "render numbers with a format, e.g. 'R-{seq:05}' (default: a bare JSON number)")
	}
}

func (f *numberFlags) series(v *vault.Vault, name string) (*numbering.Series, error) {
	coll := f.collection
	if coll == "" {
		coll = name
	}
	return v.Numbering(name, numbering.Options{Collection: coll, Field: f.field, Format: f.format})
}

// assignmentJSON is a lookup as --json prints it.
type assignmentJSON struct {
	ID          string `json:"id"`
	Numbered    bool   `json:"numbered"`
	Number      uint64 `json:"number,omitempty"`
	Formatted   string `json:"formatted,omitempty"`
	Voided      bool   `json:"voided,omitempty"`
	Provisional string `json:"provisional,omitempty"`
	Batch       uint64 `json:"batch,omitempty"`
}

func (a *app) numberCmd() *cobra.Command {
	num := &cobra.Command{
		Use:   "number",
		Short: "Deferred numbering: enqueue records anywhere, number them in a pass",
		Long: `Deferred numbering gives records gap-free numbers where none can be taken
at write time: on a file: store (a synced folder, no atomic compare-and-swap)
or on a device that is offline.

  1. put the record as usual          noydb put receipts r-7 '{"total":120}'
  2. enqueue it, anywhere, any time   noydb number enqueue receipts r-7
  3. on one machine, run a pass       noydb number pass receipts --format 'R-{seq:05}'
  4. the record now carries its number in its "number" field:
                                      noydb number lookup receipts r-7

A pass numbers the pending records 1, 2, 3 … in the order they were
enqueued, stamps each record, and records the numbers in the ledger. A pass
that is killed is finished by the next one; a record never gets two numbers.
Only one pass of a series runs at a time.`,
		Args: a.noArgs,
		RunE: a.groupRun,
	}

	var ef numberFlags
	enqueue := &cobra.Command{
		Use:   "enqueue SERIES ID...",
		Short: "Put records in line for a number",
		Long: `Put the records ID... of the series' collection in line for a number and
print each one's provisional id (ordered by time). It takes no lock and no
number, so it works on every store, offline, from many devices at once. The
record must exist and not be numbered yet; enqueuing twice is harmless.`,
		Args: rangeArgs(2, 1<<20),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := ef.series(v, args[0])
			if err != nil {
				return err
			}
			type queued struct {
				ID          string `json:"id"`
				Provisional string `json:"provisional"`
			}
			var out []queued
			for _, id := range args[1:] {
				p, err := s.Enqueue(cmd.Context(), id)
				if err != nil {
					return err
				}
				out = append(out, queued{id, p})
				if !a.json {
					fmt.Fprintf(a.io.out, "%s\t%s\n", id, p)
				}
			}
			if a.json {
				return a.printJSON(out)
			}
			return nil
		},
	}
	ef.add(enqueue, false)

	var pf numberFlags
	pass := &cobra.Command{
		Use:   "pass SERIES",
		Short: "Number every pending record of a series",
		Long: `Number every pending record of SERIES, in the order they were enqueued:
record the batch, stamp each record's --field with its number (rendered with
--format), and record each number in the ledger. Run it on one machine: a
second pass of the same series fails at once while one runs. On a terminal a
progress bar follows long passes.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := a.openVault(ctx)
			if err != nil {
				return err
			}
			s, err := pf.series(v, args[0])
			if err != nil {
				return err
			}
			stop := a.passProgress(ctx, s)
			rep, err := s.RunPass(ctx)
			stop()
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Series   string `json:"series"`
					Batch    uint64 `json:"batch"`
					First    uint64 `json:"first"`
					Last     uint64 `json:"last"`
					Assigned int    `json:"assigned"`
					Voided   int    `json:"voided"`
					Resumed  int    `json:"resumed"`
					Skipped  int    `json:"skipped"`
				}{args[0], rep.Batch, rep.First, rep.Last, rep.Assigned, rep.Voided, rep.Resumed, rep.Skipped})
			}
			switch {
			case rep.Batch == 0 && rep.Resumed == 0:
				fmt.Fprintf(a.io.out, "series %q: nothing to number", args[0])
			case rep.Batch == 0:
				fmt.Fprintf(a.io.out, "series %q: finished an interrupted batch", args[0])
			default:
				fmt.Fprintf(a.io.out, "series %q: batch %d gave numbers %d to %d", args[0], rep.Batch, rep.First, rep.Last)
			}
			fmt.Fprintf(a.io.out, " (%d stamped, %d voided, %d resumed, %d skipped)\n", rep.Assigned, rep.Voided, rep.Resumed, rep.Skipped)
			return nil
		},
	}
	pf.add(pass, true)

	var lf numberFlags
	lookup := &cobra.Command{
		Use:   "lookup SERIES ID",
		Short: "Print the number a record got",
		Long: `Print the number record ID got from SERIES (formatted as the pass stamped
it), or say that it has none yet: it is pending, or was never enqueued.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := lf.series(v, args[0])
			if err != nil {
				return err
			}
			as, ok, err := s.Lookup(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(assignmentJSON{ID: args[1], Numbered: ok, Number: as.Number, Formatted: as.Formatted,
					Voided: as.Voided, Provisional: as.Provisional, Batch: as.Batch})
			}
			switch {
			case !ok:
				_, err = fmt.Fprintf(a.io.out, "%s: no number yet (pending, or never enqueued): run 'noydb number pass %s'\n", args[1], args[0])
			case as.Voided:
				_, err = fmt.Fprintf(a.io.out, "%s\tvoid: the record was deleted before it was stamped\n", as.Formatted)
			default:
				_, err = fmt.Fprintln(a.io.out, as.Formatted)
			}
			return err
		},
	}
	lf.add(lookup, false)

	var sf numberFlags
	status := &cobra.Command{
		Use:   "status SERIES",
		Short: "Print the last number given and how many records wait",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := sf.series(v, args[0])
			if err != nil {
				return err
			}
			last, err := s.Last(cmd.Context())
			if err != nil {
				return err
			}
			pending, err := s.Pending(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Series  string `json:"series"`
					Last    uint64 `json:"last"`
					Pending int    `json:"pending"`
				}{args[0], last, pending})
			}
			_, err = fmt.Fprintf(a.io.out, "series %q: last number %d, %d pending\n", args[0], last, pending)
			return err
		},
	}
	sf.add(status, false)

	num.AddCommand(enqueue, pass, lookup, status)
	return num
}

// passProgress follows a pass on a terminal by watching its pending entries
// drain (a pass removes them as it stamps), and returns a func that stops
// it and erases the bar.
func (a *app) passProgress(ctx context.Context, s *numbering.Series) (stop func()) {
	if !a.io.errTerminal {
		return func() {}
	}
	total, err := s.Pending(ctx)
	if err != nil || total == 0 {
		return func() {}
	}
	bar := a.progress("numbering", uint64(total))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if left, err := s.Pending(ctx); err == nil && left <= total {
					bar.set(uint64(total - left))
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
		bar.done()
	}
}
