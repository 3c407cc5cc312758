package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// numberFlags pick the collection a deferred series numbers and how.
type numberFlags struct {
	collection string
	field      string
	format     string
	dateField  string // a pass of a series with periods: the records' date member
}

// add adds --collection, and with stamping (for a pass) --field and --format.
func (f *numberFlags) add(cmd *cobra.Command, stamping bool) {
	f.field = "number"
	cmd.Flags().StringVar(&f.collection, "collection", "", "collection whose records the series numbers (default: the one the series is stored with, else the series name)")
	if stamping {
		cmd.Flags().StringVar(&f.field, "field", "number", "JSON field of each record that receives its number")
		cmd.Flags().StringVar(&f.format, "format", "", "render numbers with a format, e.g. 'R-{seq:05}', stored with a new series (default: the series' stored format; a bare JSON number for a new series)")
		cmd.Flags().StringVar(&f.dateField, "date-field", "", "a series with periods whose format renders dates: JSON field of each record holding its date (RFC 3339 or YYYY-MM-DD)")
	}
}

// handle returns the numbered handle of series name over the flags'
// collection: --collection, else the collection the series is stored with
// (its first record's), else the series name.
func (f *numberFlags) handle(ctx context.Context, v *vault.Vault, name string) (*vault.Numbered[json.RawMessage], error) {
	coll, err := f.collectionOf(ctx, v, name)
	if err != nil {
		return nil, err
	}
	return cliNumbering(v, coll, name, f.format, f.field)
}

// collectionOf is the collection the series name numbers: --collection,
// else the collection the series is stored with (its first record's),
// else the series name.
func (f *numberFlags) collectionOf(ctx context.Context, v *vault.Vault, name string) (string, error) {
	coll := f.collection
	if coll == "" {
		var err error
		if coll, err = storedCollection(ctx, v, name); err != nil {
			return "", err
		}
	}
	if coll == "" {
		coll = name
	}
	return coll, nil
}

// passHandle is the handle a pass of series name runs with: for a series
// that counts per period, one numbering each period's records by their
// date (datedHandle), else handle's.
func (f *numberFlags) passHandle(ctx context.Context, v *vault.Vault, name string) (*vault.Numbered[json.RawMessage], bool, error) {
	return f.periodsHandle(ctx, v, name, f.datedHandle)
}

// periodsHandle is handle's, or for a series that counts per period the
// one dated builds over its collection with its definition; it reports
// which.
func (f *numberFlags) periodsHandle(ctx context.Context, v *vault.Vault, name string,
	dated func(v *vault.Vault, coll, series string, def sequence.Definition) (*vault.Numbered[json.RawMessage], error)) (*vault.Numbered[json.RawMessage], bool, error) {
	def, err := periodsOfSeries(ctx, v, name)
	if err != nil {
		return nil, false, err
	}
	if def.Period == sequence.PeriodNone {
		h, err := f.handle(ctx, v, name)
		return h, false, err
	}
	coll, err := f.collectionOf(ctx, v, name)
	if err != nil {
		return nil, false, err
	}
	h, err := dated(v, coll, name, def)
	return h, true, err
}

// storedCollection is the collection a series numbered by passes is stored
// with, "" when it has none yet (or the vault cannot tell offline).
func storedCollection(ctx context.Context, v *vault.Vault, name string) (string, error) {
	infos, err := v.SeriesNamed(ctx, name)
	if errors.Is(err, sequence.ErrOffline) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, s := range infos {
		if s.Passes && s.Collection != "" {
			return s.Collection, nil
		}
	}
	return "", nil
}

// cliNumbering returns the numbered handle the command line writes and
// numbers JSON records with: the number goes into the object's member
// field ("number" unless --field says otherwise), as a JSON number for a
// series without a format and as the formatted text otherwise.
func cliNumbering(v *vault.Vault, collection, series, format, field string) (*vault.Numbered[json.RawMessage], error) {
	return vault.NumberingOf(records(v, collection), series, sequence.Options{Format: format}, setJSONField(field))
}

// setJSONField returns the setter of cliNumbering. A value that is not a
// JSON object is left as it is ('put --seq' refuses those).
func setJSONField(field string) func(*json.RawMessage, sequence.Serial) {
	return func(r *json.RawMessage, s sequence.Serial) {
		var val any = s.Formatted
		if s.Formatted == strconv.FormatUint(s.N, 10) {
			val = s.N
		}
		obj := []byte(*r)
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil || m == nil {
			return
		}
		if _, ok := m[field]; ok {
			delete(m, field)
			var err error
			if obj, err = json.Marshal(m); err != nil {
				return
			}
		} else {
			var compact bytes.Buffer
			if json.Compact(&compact, obj) != nil {
				return
			}
			obj = compact.Bytes()
		}
		if out, err := withField(obj, field, val); err == nil {
			*r = out
		}
	}
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

  1. put the record with --seq:
     noydb put receipts r-7 '{"total":120}' --seq receipts --format 'R-{seq:05}'
     (on a store with atomic compare-and-swap it is numbered at once;
     elsewhere it prints "pending: numbered by the next pass")
  2. on one machine, run a pass       noydb number pass receipts
  3. the record now carries its number in its "number" field:
                                      noydb get receipts r-7 --seq receipts
                                      noydb number lookup receipts r-7

A record put without --seq can be put in line with 'noydb number enqueue'.
A pass numbers the pending records 1, 2, 3 … in the order they were
handed off, stamps each record, and records the numbers in the ledger. The
series' format is stored with it by its first use, so later commands need
no --format. A pass that is killed is finished by the next one; a record
never gets two numbers. Only one pass of a series runs at a time.`,
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
record must exist and not be numbered yet; enqueuing twice is harmless. A
series that counts per period puts each record in the line of its date's
period: --date-field names the JSON member that holds the date.`,
		Args: rangeArgs(2, 1<<20),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			h, dated, err := ef.linesHandle(cmd.Context(), v, args[0])
			if err != nil {
				return err
			}
			if dated && ef.dateField == "" {
				return usagef("series %q counts per period: each record joins the line of its date's period; name the JSON member that holds it with --date-field", args[0])
			}
			type queued struct {
				ID          string `json:"id"`
				Provisional string `json:"provisional"`
			}
			var out []queued
			for _, id := range args[1:] {
				s, err := h.SeriesOf(cmd.Context(), id)
				if err != nil {
					return err
				}
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
	enqueue.Flags().StringVar(&ef.dateField, "date-field", "", "a series with periods: JSON field of each record holding its date (RFC 3339 or YYYY-MM-DD), which picks its period")

	var pf numberFlags
	pass := &cobra.Command{
		Use:   "pass SERIES",
		Short: "Number every pending record of a series",
		Long: `Number every pending record of SERIES, in the order they were handed off
or enqueued: record the batch, stamp each record's --field with its number
(rendered in the series' stored format, or --format for a new series), and
record each number in the ledger. Run it on one machine: a
second pass of the same series fails at once while one runs. On a terminal a
progress bar follows long passes.

A series that counts per period (a NumberingOfDated series) is numbered
period by period, each record in the period of its date, with one line per
period. Its numbers render each record's own date when its format has date
tokens: --date-field names the JSON field that holds it. A closed period
numbers none of its records: they stay pending, the pass says how many,
and exits with status 1 after numbering the other periods.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := a.openVault(ctx)
			if err != nil {
				return err
			}
			h, dated, err := pf.passHandle(ctx, v, args[0])
			if err != nil {
				return err
			}
			stop := a.passProgress(ctx, h.Series())
			rep, err := h.Settle(ctx)
			stop()
			if dated && (err == nil || errors.Is(err, sequence.ErrPeriodClosed)) {
				return a.printPeriodPasses(args[0], rep)
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Series string `json:"series"`
					passJSON
				}{args[0], passJSONOf(rep)})
			}
			a.printPass(fmt.Sprintf("series %q", args[0]), rep)
			return nil
		},
	}
	pf.add(pass, true)

	var lf numberFlags
	lookup := &cobra.Command{
		Use:   "lookup SERIES ID",
		Short: "Print the number a record got",
		Long: `Print the number record ID got from SERIES (formatted as the pass stamped
it), or say that it has none yet: it is pending, or was never enqueued. A
series that counts per period is looked up in every period.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			h, _, err := lf.linesHandle(cmd.Context(), v, args[0])
			if err != nil {
				return err
			}
			// A misspelt series is no series without numbers.
			if _, _, err := seriesOf(cmd.Context(), v, args[0], nil); err != nil {
				return err
			}
			as, ok, err := lookupLines(cmd.Context(), h, args[1])
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
		Long: `Print the last number SERIES gave and how many records wait for the next
pass ("pending"). When a pass was stopped (an interrupt, a crash) in the
middle of a batch, it also says which numbers that batch holds and how many
of its records do not carry their numbers yet: those numbers are given
already, and the next pass stamps them before numbering the pending records.
With --json: {"series", "last", "pending", "batch": {"first", "last", "done",
"unstamped"}}, batch only when one is in flight. A series that counts per
period prints one line per period that had records handed off; with --json:
{"series", "periods": [{"period", "last", "pending", "batch"}]}.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			h, dated, err := sf.linesHandle(cmd.Context(), v, args[0])
			if err != nil {
				return err
			}
			// A misspelt series is no "last number 0, 0 pending".
			if _, _, err := seriesOf(cmd.Context(), v, args[0], nil); err != nil {
				return err
			}
			if dated {
				return a.printPeriodStatus(cmd.Context(), args[0], h)
			}
			st, err := h.Series().Status(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				type batchJSON struct {
					First     uint64 `json:"first"`
					Last      uint64 `json:"last"`
					Done      uint64 `json:"done"`
					Unstamped int    `json:"unstamped"`
				}
				out := struct {
					Series  string     `json:"series"`
					Last    uint64     `json:"last"`
					Pending int        `json:"pending"`
					Batch   *batchJSON `json:"batch,omitempty"`
				}{Series: args[0], Last: st.Last, Pending: st.Waiting}
				if b := st.Batch; b != nil {
					out.Batch = &batchJSON{b.First, b.Last, b.Done, b.Unstamped}
				}
				return a.printJSON(out)
			}
			if _, err := fmt.Fprintf(a.io.out, "series %q: last number %d, %d pending\n", args[0], st.Last, st.Waiting); err != nil {
				return err
			}
			if b := st.Batch; b != nil {
				_, err = fmt.Fprintf(a.io.out, "a pass stopped in the batch of numbers %d-%d: %d of its records do not carry their numbers yet; 'noydb number pass %s' finishes them\n",
					b.First, b.Last, b.Unstamped, args[0])
			}
			return err
		},
	}
	sf.add(status, false)

	num.AddCommand(enqueue, pass, lookup, status)
	return num
}

// passProgress follows a pass on a terminal through the handle's Progress
// (entries read, records checked, records numbered), and returns a func
// that stops it and erases the bar.
func (a *app) passProgress(ctx context.Context, s *numbering.Series) (stop func()) {
	if !a.io.errTerminal {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var bar *progressBar
		phase := numbering.PassIdle
		t := time.NewTicker(redrawEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				if bar != nil {
					bar.done()
				}
				return
			case <-t.C:
			}
			p := s.Progress()
			if p.Phase == numbering.PassIdle {
				continue
			}
			if p.Phase != phase || bar == nil {
				if bar != nil {
					bar.done()
				}
				phase = p.Phase
				bar = a.progress(p.Phase.String(), uint64(p.Total))
				if p.Phase == numbering.PassReading {
					bar.counts = func(n, _ uint64) string { return fmt.Sprintf("%d pending entries", n) }
				}
			}
			bar.total = uint64(p.Total)
			bar.set(uint64(p.Done))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
