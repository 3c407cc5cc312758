package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/vault"
)

// demoSecret is the demo's own secret, printed by the demo: never use it for data.
const demoSecret = "noydb-demo-secret"

// demoInvoice is the record type of the demo.
type demoInvoice struct {
	Number   string  `json:"number"`
	Customer string  `json:"customer"`
	Total    float64 `json:"total"`
}

func (a *app) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Show what noydb does, in one run, with no setup",
		Long: `Walk through the product on the in-memory store (mem:), so nothing is written
to disk and no secret needs setting up: the demo uses its own secret and says
so. It opens a vault, stores encrypted invoices numbered by a formatted series
partitioned by year, shows what the store holds (and that it holds no
plaintext), catches a tampered record, audits the series, verifies the
ledger, and says where the data went.

With an explicit --store (badger:DIR, postgres://…) the same walkthrough runs
there, in the vault "demo".`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("store") {
				a.storeSpec = "mem:"
			}
			if !cmd.Flags().Changed("vault") {
				a.vaultName = "demo"
			}
			a.fixedSecret = []byte(demoSecret)
			a.quietMem = true
			return a.demo(cmd.Context())
		},
	}
}

func (a *app) demo(ctx context.Context) error {
	out := a.io.out
	spec, err := a.parsedStore()
	if err != nil {
		return err
	}
	where := "the in-memory store (mem:): nothing is written to disk"
	if spec.kind != "mem" {
		where = spec.String()
	}
	fmt.Fprintf(out, "noydb demo, on %s.\n", where)
	fmt.Fprintf(out, "It uses its own secret, %q; real commands read the secret from\n", demoSecret)
	fmt.Fprintf(out, "$%s, --secret-file or a prompt, never from a flag.\n", envSecret)

	step(out, 1, "A vault")
	start := time.Now()
	a.create = true // a throwaway vault of its own
	v, err := a.openVault(ctx)
	if err != nil {
		return err
	}
	kdf := crypto.DefaultKDF
	if a.env(envTestKDF) == "1" {
		kdf = testKDF
	}
	fmt.Fprintf(out, "   Opened vault %q as user %q in %s. Created on first open, it has a\n", a.vaultName, a.user, time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(out, "   random data key, wrapped by a key derived from the secret with Argon2id\n")
	mem := fmt.Sprintf("%d KiB", kdf.MemoryKiB)
	if kdf.MemoryKiB%1024 == 0 {
		mem = fmt.Sprintf("%d MiB", kdf.MemoryKiB/1024)
	}
	fmt.Fprintf(out, "   (t=%d, %s, p=%d): that derivation is most of the time it took.\n", kdf.Time, mem, kdf.Threads)

	step(out, 2, "Encrypted records, numbered in the same commit")
	invoices := vault.CollectionOf[demoInvoice](v, "invoices")
	const format = "{partition.0}/{seq:04}"
	fmt.Fprintf(out, "   Series \"fatture\", one counter per year, format %q:\n", format)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	type sale struct {
		id       string
		year     int
		customer string
		total    float64
	}
	var last sequence.Serial
	var lastSeq *sequence.Sequence
	for _, s := range []sale{
		{"inv-acme", 2026, "ACME S.p.A.", 1200},
		{"inv-globex", 2026, "Globex GmbH", 86.5},
		{"inv-initech", 2027, "Initech Ltd", 310},
		{"inv-umbrella", 2026, "Umbrella SA", 42},
	} {
		seq, err := v.Sequence("fatture", sequence.Options{Partition: []any{s.year}, Format: format})
		if err != nil {
			return err
		}
		inv, err := invoices.PutNumbered(ctx, s.id, seq, func(n sequence.Serial) (demoInvoice, error) {
			last = n
			return demoInvoice{Number: n.Formatted, Customer: s.customer, Total: s.total}, nil
		})
		if err != nil {
			return err
		}
		lastSeq = seq
		fmt.Fprintf(tw, "   put invoices/%s\t%s\t%s\t%.2f\n", s.id, inv.Number, inv.Customer, inv.Total)
	}
	tw.Flush()
	fmt.Fprintln(out, "   2027 counts on its own; each record and its number commit together, so a")
	fmt.Fprintln(out, "   failed write takes no number.")

	step(out, 3, "What the store holds")
	if err := a.demoStore(ctx, "ACME"); err != nil {
		return err
	}

	step(out, 4, "A tampered record is caught")
	key := "v/" + a.vaultName + "/invoices/inv-acme"
	it, err := a.store.Get(ctx, key)
	if err != nil {
		return err
	}
	bad := bytes.Clone(it.Value)
	bad[len(bad)-1] ^= 1
	if _, err := a.store.Put(ctx, key, bad); err != nil {
		return err
	}
	_, gerr := invoices.Get(ctx, "inv-acme")
	fmt.Fprintf(out, "   Flipped one bit of invoices/inv-acme in the store; get says: %v\n", gerr)
	if _, err := a.store.Put(ctx, key, it.Value); err != nil {
		return err
	}
	inv, err := invoices.Get(ctx, "inv-acme")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   Put the original bytes back; get says: %s, %s, %.2f\n", inv.Number, inv.Customer, inv.Total)

	step(out, 5, "A void, and an audit of the series")
	if err := lastSeq.Void(ctx, last.N, "customer cancelled the order"); err != nil {
		return err
	}
	fmt.Fprintf(out, "   Voided %s: the number stays taken, the audit says why.\n", last.Formatted)
	audit, err := lastSeq.Audit(ctx)
	if err != nil {
		return err
	}
	rep := auditOf(lastSeq, audit)
	for _, r := range rep.Numbers {
		detail := r.Collection + "/" + r.ID
		if r.Status == statusVoided {
			detail = fmt.Sprintf("%q (%s)", r.Reason, detail)
		}
		fmt.Fprintf(out, "   %s  %-7s  %s\n", r.Formatted, r.Status, detail)
	}

	step(out, 6, "The ledger, verified")
	n := 0
	var lines []string
	for e, err := range v.Audit().Read(ctx, 1) {
		if err != nil {
			return err
		}
		n++
		lines = append(lines, fmt.Sprintf("   %3d  %-16s  %s", e.Seq, e.Kind, describe(e)))
	}
	for _, l := range lines[max(0, len(lines)-6):] {
		fmt.Fprintln(out, l)
	}
	if _, err := v.Audit().Verify(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "   %d entries (the last %d above): positions dense, hash chain intact.\n", n, min(n, 6))

	step(out, 7, "Where the data went")
	switch spec.kind {
	case "mem":
		fmt.Fprintln(out, "   Into this process's memory: it is gone now that the demo ends.")
		where := "in your data folder"
		if d, err := a.defaultStore(); err == nil {
			where = d
		}
		fmt.Fprintf(out, "   To keep a vault on disk (by default %s, one store per person\n", where)
		fmt.Fprintln(out, "   whatever the working folder; --store or $"+envStore+" picks another):")
		fmt.Fprintln(out, "     export NOYDB_SECRET='choose a long secret'")
		fmt.Fprintln(out, "     noydb init")
		fmt.Fprintln(out, `     noydb put invoices inv-1 '{"customer":"ACME","total":120}'`)
		fmt.Fprintln(out, "     noydb seq next fatture --partition 2026 --format '{partition.0}/{seq:04}'")
		fmt.Fprintln(out, "     noydb ledger verify")
	case "badger", "file":
		dir, _ := filepath.Abs(spec.dir)
		fmt.Fprintf(out, "   Into %s, vault %q (secret %q).\n", dir, a.vaultName, demoSecret)
	default:
		fmt.Fprintf(out, "   Into %s, vault %q (secret %q).\n", spec, a.vaultName, demoSecret)
	}
	return nil
}

func step(w io.Writer, n int, title string) {
	fmt.Fprintf(w, "\n%d. %s\n", n, title)
}

// demoStore lists what the store holds for the demo vault, grouped by what it
// is, and searches every value for needle.
func (a *app) demoStore(ctx context.Context, needle string) error {
	out := a.io.out
	prefix := "v/" + a.vaultName + "/"
	type group struct {
		what  string
		keys  int
		bytes int
		first string
	}
	order := []string{"_header", "_keyring/", "_sequences/", "_ledger/", ""}
	names := map[string]string{
		"_header":     "vault header (salt, KDF cost)",
		"_keyring/":   "wrapped data keys, one per user",
		"_sequences/": "sealed counters and void markers",
		"_ledger/":    "sealed ledger entries and head",
		"":            "sealed records",
	}
	groups := map[string]*group{}
	found := false
	sample := ""
	for it, err := range a.store.List(ctx, prefix) {
		if err != nil {
			return err
		}
		rest := it.Key[len(prefix):]
		kind := ""
		for _, p := range order[:4] {
			if strings.HasPrefix(rest, p) {
				kind = p
				break
			}
		}
		g := groups[kind]
		if g == nil {
			g = &group{what: names[kind], first: it.Key}
			groups[kind] = g
		}
		g.keys++
		g.bytes += len(it.Value)
		found = found || bytes.Contains(it.Value, []byte(needle))
		if kind == "" && strings.HasSuffix(it.Key, "/inv-acme") {
			sum := sha256.Sum256(it.Value)
			sample = fmt.Sprintf("   invoices/inv-acme as stored: %d bytes, sha256 %s…\n", len(it.Value), hex.EncodeToString(sum[:8]))
		}
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, k := range order {
		if g := groups[k]; g != nil {
			fmt.Fprintf(tw, "   %s\t%d bytes\t%s\te.g. %q\n", plural(g.keys, "key", "keys"), g.bytes, g.what, g.first)
		}
	}
	tw.Flush()
	fmt.Fprint(out, sample)
	if found {
		return fmt.Errorf("demo: %q found in a stored value: plaintext reached the store", needle)
	}
	fmt.Fprintf(out, "   Searched every stored value for %q: not found. The store sees names and sizes only.\n", needle)
	return nil
}
