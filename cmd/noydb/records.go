package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// records returns the collection name of v, holding raw JSON records.
func records(v *vault.Vault, name string) *vault.Collection[json.RawMessage] {
	return vault.CollectionOf[json.RawMessage](v, name)
}

func (a *app) recordCmds() []*cobra.Command {
	var numbered seqFlags
	var series, field string
	put := &cobra.Command{
		Use:   "put COLLECTION ID [JSON | -]",
		Short: "Store a JSON record, encrypted",
		Long: `Store a JSON record under ID in COLLECTION, replacing any earlier revision.
The value is the JSON argument, or standard input when it is '-' or missing.
The record is sealed before it reaches the store and the change is recorded
in the vault's ledger. The vault must exist ('noydb init', or --create),
and so must the collection: the first record of a new one needs --new, so
that a misspelt collection is refused instead of started.

With --seq SERIES the record is numbered by SERIES: the number goes into the
record's --field ("number": a JSON number, or the formatted text when the
series has a format, set with --format by its first use and stored with
it). On a store with atomic compare-and-swap it takes the next number in
the same commit (so a failed write takes no number) and prints it; on a
file: store it is written pending, handed off to the series, and prints
"pending: numbered by the next pass" with its provisional id: run
'noydb number pass SERIES' (with --collection when the collection is not
named SERIES). The record must be a JSON object without that field.

Without --seq it prints "put COLLECTION/ID (revision N)", or with --json
{"collection", "id", "revision"}.`,
		Example: `  noydb put invoices inv-1 '{"customer":"ACME","total":120}'
  jq -c . invoice.json | noydb put invoices inv-2 -
  noydb put invoices inv-3 '{"total":99}' --seq fatture --partition 2026 --format '{partition.0}/{seq:04}'`,
		Args: rangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.shortCommand()
			var value []byte
			if len(args) == 3 && args[2] != "-" {
				value = []byte(args[2])
			} else {
				b, err := io.ReadAll(io.LimitReader(a.io.in, stores.MaxValueLen+1))
				if err != nil {
					return fmt.Errorf("put %s/%s: read standard input: %w", args[0], args[1], err)
				}
				value = b
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, value); err != nil {
				return usagef("put %s/%s: the value is not valid JSON", args[0], args[1])
			}
			value = compact.Bytes()
			if series == "" {
				if numbered.partition != "" || numbered.format != "" || numbered.defines() {
					return usagef("--partition and --format need --seq (so do --date, --period, --fiscal-start, --tz, --meta, --corrects and --correcting)")
				}
				v, err := a.openVault(cmd.Context())
				if err != nil {
					return err
				}
				if err := a.requireCollection(cmd.Context(), v, args[0], numbered.create, true); err != nil {
					return err
				}
				before, err := v.Audit().Head(cmd.Context())
				if err != nil {
					return err
				}
				if err := records(v, args[0]).Put(cmd.Context(), args[1], json.RawMessage(value)); err != nil {
					return err
				}
				rev, err := putRevision(cmd.Context(), v, before, args[0], args[1])
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(putJSON{args[0], args[1], rev})
				}
				_, err = fmt.Fprintf(a.io.out, "put %s/%s (revision %d)\n", args[0], args[1], rev)
				return err
			}
			if err := canCarry(value, field); err != nil {
				return usagef("put %s/%s --seq: %v", args[0], args[1], err)
			}
			if _, err := numbered.options(); err != nil {
				return err
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			if err := a.requireCollection(cmd.Context(), v, args[0], numbered.create, true); err != nil {
				return err
			}
			if err := a.requireSeries(cmd.Context(), v, series, numbered.mayCreate(), true); err != nil {
				return err
			}
			if numbered.partition == "" && !numbered.defines() && !datedFormat(numbered.format) {
				return a.putHandedOff(cmd, v, args[0], args[1], series, numbered.format, field, value)
			}
			// A partitioned, dated or defined series (or a format that
			// renders the date): numbered at write time only.
			a.writeTime = true
			s, err := a.seriesHandle(cmd.Context(), &numbered, v, series)
			if err != nil {
				return err
			}
			def, err := s.Definition(cmd.Context())
			if err != nil {
				return err
			}
			var got sequence.Serial
			_, err = records(v, args[0]).PutNumbered(cmd.Context(), args[1], s, func(serial sequence.Serial) (json.RawMessage, error) {
				got = serial
				var num any = serial.N
				if def.Format != "" {
					num = serial.Formatted
				}
				return withField(value, field, num)
			})
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(serialJSON{s.Series(), s.Partition(), got.N, got.Formatted, got.Period})
			}
			_, err = fmt.Fprintln(a.io.out, got.Formatted)
			return err
		},
	}
	put.Flags().StringVar(&series, "seq", "", "number the record from this series: in the same commit, or by the next pass on a file: store")
	put.Flags().StringVar(&field, "field", "number", "with --seq: the JSON field that receives the number")
	numbered.add(put)
	numbered.addPeriod(put, true, true, "to number the record in")
	numbered.addDefine(put)
	numbered.addNew(put, "the collection (and with --seq the series)")
	numbered.addDate(put, "with --seq: the document's date, which picks the period")
	numbered.addCorrecting(put)

	var getSeq, getField string
	get := &cobra.Command{
		Use:   "get COLLECTION ID",
		Short: "Print a record's JSON",
		Long: `Print the JSON of the record ID in COLLECTION. With --json it prints
{"collection", "id", "value"}. A record the store changed or moved fails
authentication instead of being printed.

With --seq SERIES it prints the record with the number of SERIES it
carries in its --field, or, for a record waiting for a pass, a second line
"pending: numbered by the next pass" with its provisional id (with --json:
"number", "formatted", "pending", "provisional").`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.shortCommand()
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			if err := a.requireCollection(cmd.Context(), v, args[0], false, false); err != nil {
				return err
			}
			if getSeq != "" {
				return a.getNumbered(cmd, v, args[0], args[1], getSeq, getField)
			}
			val, err := records(v, args[0]).Get(cmd.Context(), args[1])
			if err != nil {
				return notFound("get", args, err)
			}
			if a.json {
				return a.printJSON(struct {
					Collection string          `json:"collection"`
					ID         string          `json:"id"`
					Value      json.RawMessage `json:"value"`
				}{args[0], args[1], unescapeHTML(val)})
			}
			_, err = fmt.Fprintf(a.io.out, "%s\n", unescapeHTML(val))
			return err
		},
	}

	get.Flags().StringVar(&getSeq, "seq", "", "show the number of this series (or that the record is pending)")
	get.Flags().StringVar(&getField, "field", "number", "with --seq: the JSON field that receives the number")

	list := &cobra.Command{
		Use:   "list COLLECTION",
		Short: "Print every record of a collection",
		Long: `Print every record of COLLECTION in id order, one per line: the id, a tab,
and the record's JSON. With --json it prints an array of
{"id", "revision", "value"}.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			if err := a.requireCollection(cmd.Context(), v, args[0], false, false); err != nil {
				return err
			}
			w := bufio.NewWriter(a.io.out)
			defer w.Flush()
			if a.json {
				fmt.Fprint(w, "[")
			}
			n := 0
			for r, err := range records(v, args[0]).List(cmd.Context()) {
				if err != nil {
					return err
				}
				if a.json {
					if n > 0 {
						fmt.Fprint(w, ",")
					}
					b, err := jsonLine(struct {
						ID       string          `json:"id"`
						Revision uint64          `json:"revision"`
						Value    json.RawMessage `json:"value"`
					}{r.ID, r.Revision, unescapeHTML(r.Value)})
					if err != nil {
						return err
					}
					fmt.Fprintf(w, "\n  %s", b)
				} else {
					fmt.Fprintf(w, "%s\t%s\n", r.ID, unescapeHTML(r.Value))
				}
				n++
			}
			if a.json {
				if n > 0 {
					fmt.Fprint(w, "\n")
				}
				fmt.Fprintln(w, "]")
			}
			return w.Flush()
		},
	}

	del := &cobra.Command{
		Use:   "delete COLLECTION ID",
		Short: "Delete a record",
		Long: `Delete the record ID of COLLECTION and record the deletion in the ledger.
It prints "deleted COLLECTION/ID", or "COLLECTION/ID did not exist" when there
was no such record (which is no failure). With --json it prints
{"collection", "id", "deleted"}.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.shortCommand()
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			err = records(v, args[0]).Delete(cmd.Context(), args[1])
			deleted := err == nil
			if errors.Is(err, vault.ErrNotFound) {
				err = nil
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(deleteJSON{args[0], args[1], deleted})
			}
			if deleted {
				_, err = fmt.Fprintf(a.io.out, "deleted %s/%s\n", args[0], args[1])
			} else {
				_, err = fmt.Fprintf(a.io.out, "%s/%s did not exist\n", args[0], args[1])
			}
			return err
		},
	}

	count := &cobra.Command{
		Use:   "count COLLECTION",
		Short: "Print how many records a collection holds",
		Long:  `Print how many records COLLECTION holds, without decrypting them.`,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.shortCommand()
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			if err := a.requireCollection(cmd.Context(), v, args[0], false, false); err != nil {
				return err
			}
			n, err := records(v, args[0]).Count(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Collection string `json:"collection"`
					Count      int    `json:"count"`
				}{args[0], n})
			}
			_, err = fmt.Fprintln(a.io.out, n)
			return err
		},
	}
	return []*cobra.Command{put, get, list, del, count}
}

// notFound words a missing record for people: the store's own wording of
// stores.ErrNotFound varies with the store.
func notFound(op string, args []string, err error) error {
	if errors.Is(err, vault.ErrNotFound) {
		return fmt.Errorf("%s %s/%s: no such record (see 'noydb list %s')", op, args[0], args[1], args[0])
	}
	return err
}

// canCarry checks that obj (compact JSON) is an object without field, so the
// record can be given its number there.
func canCarry(obj []byte, field string) error {
	if len(obj) == 0 || obj[0] != '{' {
		return errors.New("the record must be a JSON object to carry its number")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return err
	}
	if _, ok := m[field]; ok {
		return fmt.Errorf("the record already has a %q field: choose another --field", field)
	}
	return nil
}

// withField returns the compact JSON object obj with "field": value first,
// keeping the rest of obj as it was written.
func withField(obj []byte, field string, value any) (json.RawMessage, error) {
	kv, err := json.Marshal(map[string]any{field: value})
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), kv[:len(kv)-1]...) // {"field":value
	if rest := obj[1:]; rest[0] != '}' {
		out = append(out, ',')
		out = append(out, rest...)
	} else {
		out = append(out, '}')
	}
	return out, nil
}

// putHandedOff writes the JSON object value as collection/id through the
// numbered handle of series and prints its number, or that it is pending.
func (a *app) putHandedOff(cmd *cobra.Command, v *vault.Vault, collection, id, series, format, field string, value []byte) error {
	h, err := cliNumbering(v, collection, series, format, field)
	if err != nil {
		return err
	}
	r, err := h.Put(cmd.Context(), id, json.RawMessage(value))
	if err != nil {
		return err
	}
	if a.json {
		if r.Pending {
			return a.printJSON(pendingJSON{series, collection, id, true, r.Provisional})
		}
		return a.printJSON(serialJSON{series, nil, r.Serial.N, r.Serial.Formatted, r.Serial.Period})
	}
	if r.Pending {
		_, err = fmt.Fprintf(a.io.out, "pending: numbered by the next pass (provisional id %s)\n", r.Provisional)
		return err
	}
	_, err = fmt.Fprintln(a.io.out, r.Serial.Formatted)
	return err
}

// pendingJSON is a record handed off to a series, as --json prints it.
type pendingJSON struct {
	Series      string `json:"series"`
	Collection  string `json:"collection"`
	ID          string `json:"id"`
	Pending     bool   `json:"pending"`
	Provisional string `json:"provisional"`
}

// getNumbered prints collection/id with the number of series, or says it
// is pending.
func (a *app) getNumbered(cmd *cobra.Command, v *vault.Vault, collection, id, series, field string) error {
	h, err := cliNumbering(v, collection, series, "", field)
	if err != nil {
		return err
	}
	r, err := h.Get(cmd.Context(), id)
	if err != nil {
		return notFound("get", []string{collection, id}, err)
	}
	if a.json {
		return a.printJSON(struct {
			Collection  string          `json:"collection"`
			ID          string          `json:"id"`
			Value       json.RawMessage `json:"value"`
			Number      uint64          `json:"number,omitempty"`
			Formatted   string          `json:"formatted,omitempty"`
			Pending     bool            `json:"pending"`
			Provisional string          `json:"provisional,omitempty"`
		}{collection, id, unescapeHTML(r.Value), r.Serial.N, r.Serial.Formatted, r.Pending, r.Provisional})
	}
	if _, err := fmt.Fprintf(a.io.out, "%s\n", unescapeHTML(r.Value)); err != nil {
		return err
	}
	if r.Pending {
		_, err = fmt.Fprintf(a.io.out, "pending: numbered by the next pass (provisional id %s)\n", r.Provisional)
	}
	return err
}
