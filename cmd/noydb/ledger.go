package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/vault"
)

func (a *app) ledgerCmd() *cobra.Command {
	l := &cobra.Command{
		Use:   "ledger",
		Short: "The vault's audit ledger: verify, tail",
		Long: `Every change to a vault (records put and deleted, numbers taken, seeded,
voided, assigned) is an entry of its append-only audit ledger: positions
1, 2, 3 … with no gap, each entry chained to the one before by a keyed hash
that the store cannot forge.`,
		Args: a.noArgs,
		RunE: a.groupRun,
	}
	l.AddCommand(a.verifyCmd(), a.tailCmd())
	return l
}

// verifyJSON is what 'ledger verify --json' prints.
type verifyJSON struct {
	OK bool `json:"ok"`
	// Entries is how many entries, from 1, are intact.
	Entries uint64 `json:"entries"`
	// Head is the position the head record claims.
	Head uint64 `json:"head"`
	// FirstBad is the first position at fault, 0 when none (or the head record itself).
	FirstBad uint64 `json:"first_bad,omitempty"`
	Problem  string `json:"problem,omitempty"`
}

func (a *app) verifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check the ledger: dense positions, hash chain, authentication",
		Long: `Read the whole ledger and check that positions are dense from 1 to the head,
that every entry authenticates and sits at its own position, and that each
entry's hash follows from its predecessor's up to the head. On a terminal a
progress bar shows how far it got.

Exit status 0 only when the ledger is intact; otherwise 1, naming the first
bad position and why.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := a.openVaultToRead(ctx)
			if err != nil {
				return err
			}
			report, err := a.verify(ctx, v.Audit())
			if err != nil && report.Problem == nil {
				return err
			}
			rep := verifyJSON{OK: report.OK(), Entries: report.Entries, Head: report.Head.Seq, FirstBad: report.FirstBad}
			if report.Problem != nil {
				rep.Problem = report.Problem.Error()
			}
			if a.json {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else if rep.OK {
				fmt.Fprintf(a.io.out, "ledger of vault %q: %s, positions dense, hash chain intact up to the head (%d)\n",
					a.vaultName, plural(int(rep.Entries), "entry", "entries"), rep.Head)
			}
			if rep.OK {
				return nil
			}
			where := "the head record"
			if rep.FirstBad > 0 {
				where = "entry " + strconv.FormatUint(rep.FirstBad, 10)
			}
			return fmt.Errorf("ledger of vault %q does not verify: first bad: %s: %v (%s intact before it)",
				a.vaultName, where, strings.TrimPrefix(rep.Problem, "ledger: "), plural(int(rep.Entries), "entry", "entries"))
		},
	}
}

// verify is Audit.Verify, with a progress bar on a terminal. Both paths
// run the same verification (signatures and roles included), the bar only
// watching the walk go by.
func (a *app) verify(ctx context.Context, l *vault.Audit) (ledger.Report, error) {
	if !a.io.errTerminal {
		return l.Verify(ctx)
	}
	head, err := l.Head(ctx)
	if err != nil && !errors.Is(err, ledger.ErrTampered) {
		return ledger.Report{}, fmt.Errorf("verify ledger: %w", err)
	}
	bar := a.progress("verifying ledger", head.Seq)
	defer bar.done()
	return l.VerifyProgress(ctx, bar.set)
}

// entryJSON is a ledger entry as --json prints it.
type entryJSON struct {
	Seq        uint64   `json:"seq"`
	Time       string   `json:"time"`
	Actor      string   `json:"actor"`
	Kind       string   `json:"kind"`
	Collection string   `json:"collection,omitempty"`
	ID         string   `json:"id,omitempty"`
	Revision   uint64   `json:"revision,omitempty"`
	CipherHash string   `json:"cipher_hash,omitempty"`
	Series     string   `json:"series,omitempty"`
	Partition  []string `json:"partition,omitempty"`
	Number     uint64   `json:"number,omitempty"`
	From       uint64   `json:"from,omitempty"`
	RequestID  string   `json:"request_id,omitempty"`
	Reason     string   `json:"reason,omitempty"`
}

func toEntryJSON(e ledger.Entry) entryJSON {
	return entryJSON{
		Seq: e.Seq, Time: e.Time.UTC().Format(time.RFC3339Nano), Actor: e.Actor, Kind: e.Kind.String(),
		Collection: e.Collection, ID: e.ID, Revision: e.Revision, CipherHash: hex.EncodeToString(e.CipherHash),
		Series: e.Series, Partition: e.Partition, Number: e.Number, From: e.From,
		RequestID: e.RequestID, Reason: e.Reason,
	}
}

func (a *app) tailCmd() *cobra.Command {
	var from uint64
	var lines int
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print the last ledger entries",
		Long: `Print the last entries of the ledger (-n, 10 by default), or every entry from
position --from on. Entries are checked as they are read, as 'ledger verify'
does; a problem stops the listing with exit status 1. With --json it prints
an array of entries.`,
		Example: `  noydb ledger tail -n 50
  noydb ledger tail --from 1 --json | jq '.[] | select(.kind == "number-voided")'`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if lines < 0 {
				return usagef("-n must not be negative")
			}
			v, err := a.openVaultToRead(ctx)
			if err != nil {
				return err
			}
			l := v.Audit()
			if !cmd.Flags().Changed("from") {
				head, err := l.Head(ctx)
				if err != nil {
					return fmt.Errorf("read ledger head: %w", err)
				}
				from = 1
				if head.Seq > uint64(lines) {
					from = head.Seq - uint64(lines) + 1
				}
				if lines == 0 {
					from = head.Seq + 1
				}
			}
			w := bufio.NewWriter(a.io.out)
			defer w.Flush()
			if a.json {
				fmt.Fprint(w, "[")
			}
			n := 0
			for e, err := range l.Read(ctx, max(from, 1)) {
				if err != nil {
					if a.json {
						fmt.Fprintln(w, "]")
					}
					w.Flush()
					return fmt.Errorf("read ledger: %w", err)
				}
				if a.json {
					if n > 0 {
						fmt.Fprint(w, ",")
					}
					fmt.Fprint(w, "\n  ")
					b, err := jsonLine(toEntryJSON(e))
					if err != nil {
						return err
					}
					w.Write(b)
				} else {
					fmt.Fprintf(w, "%6d  %s  %-12s  %-22s  %s\n", e.Seq, e.Time.UTC().Format("2006-01-02 15:04:05.000Z"),
						e.Actor, e.Kind, describe(e))
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
	cmd.Flags().Uint64Var(&from, "from", 0, "print every entry from this position on (default: the last -n entries)")
	cmd.Flags().IntVarP(&lines, "lines", "n", 10, "how many of the last entries to print (without --from)")
	return cmd
}

// describe says what an entry records, in a few words.
func describe(e ledger.Entry) string {
	series := strconv.Quote(e.Series)
	if len(e.Partition) > 0 {
		series += " [" + strings.Join(e.Partition, ", ") + "]"
	}
	record := e.Collection + "/" + e.ID
	switch e.Kind {
	case ledger.RecordPut:
		s := fmt.Sprintf("%s rev %d", record, e.Revision)
		if e.Series != "" {
			s += fmt.Sprintf(" numbered %s #%d", series, e.Number)
		}
		if e.Reason == vault.ResealedReason {
			s += " (re-sealed with the new keys)"
		}
		return s
	case ledger.RecordDelete:
		return fmt.Sprintf("%s (was rev %d)", record, e.Revision)
	case ledger.NumberAllocated:
		s := fmt.Sprintf("%s #%d", series, e.Number)
		if e.RequestID != "" {
			s += " for request " + strconv.Quote(e.RequestID)
		}
		if e.Reason != "" { // a credit note: the number it corrects
			s += " " + e.Reason
		}
		return s
	case ledger.SeriesSeeded:
		s := fmt.Sprintf("%s from %d to %d", series, e.From, e.Number)
		if e.Reason != "" {
			s += ": " + strconv.Quote(e.Reason)
		}
		return s
	case ledger.NumberVoided:
		return fmt.Sprintf("%s #%d: %s", series, e.Number, strconv.Quote(e.Reason))
	case ledger.NumberAssigned:
		return fmt.Sprintf("%s gets %s #%d", record, series, e.Number)
	case ledger.SeriesDefined:
		return fmt.Sprintf("%s: %s", series, e.Reason)
	case ledger.PeriodClosed:
		return fmt.Sprintf("%s closed at #%d", series, e.Number)
	case ledger.SeriesBound:
		return fmt.Sprintf("%s bound to collection %s", series, e.Collection)
	case ledger.AppEvent:
		name, data, _ := e.Event()
		return fmt.Sprintf("%s (%d bytes)", strconv.Quote(name), len(data))
	case ledger.RecordPulled:
		return fmt.Sprintf("%s rev %d, from the hub (its change %d)", record, e.Revision, e.Number)
	case ledger.RecordPulledDelete:
		return fmt.Sprintf("%s deleted (was rev %d), from the hub (its change %d)", record, e.Revision, e.Number)
	case ledger.SyncConflict:
		// Reason is "<policy>: hub lost" or "<policy>: device lost".
		policy, lost, _ := strings.Cut(e.Reason, ": ")
		return fmt.Sprintf("%s: conflict, %s (rev %d) by %s", record, lost, e.Revision, policy)
	case ledger.PersonGranted:
		s := fmt.Sprintf("%s is a %s", e.ID, e.Reason)
		if cols, limited, _ := e.GrantCollections(); limited {
			s += ", limited to " + strings.Join(cols, ",")
		}
		return s
	case ledger.PersonRevoked:
		return fmt.Sprintf("%s removed (access revoked)", e.ID)
	case ledger.SecretChanged:
		return fmt.Sprintf("secret of %s changed", e.ID)
	case ledger.KeyringUpgraded:
		return fmt.Sprintf("keyring entry of %s (%s) upgraded to the current layout", e.ID, e.Reason)
	case ledger.RecoveryCodesIssued:
		return fmt.Sprintf("%s for %s (earlier ones no longer work)", plural(int(e.Number), "recovery code", "recovery codes"), e.ID)
	case ledger.RecoveryCodeUsed:
		return fmt.Sprintf("%s opened with recovery code %s and set a new secret", e.ID, e.RequestID)
	case ledger.RecoveryCodesRevoked:
		return fmt.Sprintf("unused recovery codes of %s revoked", e.ID)
	case ledger.KeysRenewed:
		return fmt.Sprintf("keys of %s renewed (new signing key)", e.ID)
	case ledger.KeysResealed:
		return fmt.Sprintf("every record re-sealed with data keys of generation %d or later", e.Number)
	case ledger.KeysRotated:
		// Reason says why: "rotate", "revoke <user>", "grant <user>" (a
		// limited grant), "collections of <user>".
		why := e.Reason
		switch verb, who, _ := strings.Cut(e.Reason, " "); verb {
		case "rotate":
			why = "vault rotate"
		case "revoke":
			why = "after removing " + who
		case "grant":
			why = "for the limited grant of " + who
		case "collections":
			why = "after changing the " + e.Reason
		}
		if why == "" {
			return fmt.Sprintf("new data keys, generation %d", e.Number)
		}
		return fmt.Sprintf("new data keys, generation %d (%s)", e.Number, why)
	}
	return ""
}
