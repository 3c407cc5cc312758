package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/sequence"
	"github.com/noydb-go/noydb/stores"
	"github.com/noydb-go/noydb/vault"
)

// A misspelt name must not start something new: a series or a collection
// the vault has never seen is created only when the user says so ('seq
// create', definition flags on a series' first use, or --new); otherwise the
// command fails with a usage error naming the closest names, and writes
// nothing. Reads of a missing collection say so too.

func (a *app) seqCreateCmd() *cobra.Command {
	var f seqFlags
	cmd := &cobra.Command{
		Use:   "create SERIES",
		Short: "Create a series, with its definition, before its first number",
		Long: `Create SERIES without taking a number, storing its definition (--format,
--period, --fiscal-start, --tz, --meta, --corrects) with it, so that every
later command numbers it the same way without repeating them. Commands that
take a number of a series the vault has never seen refuse it unless it was
created here, or they are given its definition flags or --new: a misspelt
series name then fails instead of starting a new count at 1.

Creating a series that exists with the same definition does nothing, and
says so; with another definition it is refused. It prints "created series
SERIES" (and its definition), or with --json {"series", "definition",
"created"}. It needs a store with atomic compare-and-swap; on a file: store
a series is created by its first 'put --seq SERIES --new'.`,
		Example: `  noydb seq create invoices --period fiscal-year --fiscal-start 04-01 --tz Europe/Rome --format 'FY{FY}/{seq:04}'
  noydb seq create credit-notes --corrects invoices --format 'CN-{seq:04}'
  noydb seq create tickets`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			if f.partition != "" {
				return usagef("--partition: a series is created whole; each partition counts from 1 at its first number")
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := v.Sequence(args[0], o)
			if err != nil {
				return err
			}
			existed, err := s.Exists(cmd.Context())
			if err != nil {
				return err
			}
			if err := s.Declare(cmd.Context()); err != nil {
				return err
			}
			def, err := s.Definition(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Series     string `json:"series"`
					Definition string `json:"definition,omitempty"`
					Created    bool   `json:"created"`
				}{args[0], def.String(), !existed})
			}
			shown := ""
			if d := def.String(); d != "" {
				shown = " (" + d + ")"
			}
			if existed {
				_, err = fmt.Fprintf(a.io.out, "series %s exists already%s: nothing to do\n", args[0], shown)
			} else {
				_, err = fmt.Fprintf(a.io.out, "created series %s%s\n", args[0], shown)
			}
			return err
		},
	}
	f.add(cmd)
	f.addPeriod(cmd, true, false, "")
	f.addDefine(cmd)
	return cmd
}

// mayCreate reports whether the flags allow creating a series the vault
// has never seen: --new, or its definition flags.
func (f *seqFlags) mayCreate() bool { return f.create || f.definesSeries() }

// addNew adds --new to a command that may create a series or a collection.
func (f *seqFlags) addNew(cmd *cobra.Command, what string) {
	f.creates = true
	cmd.Flags().BoolVar(&f.create, "new", false, "create "+what+" if the vault has never seen it (else a name it does not know is refused as a typo)")
}

// requireSeries fails with a usage error naming the closest series when
// the vault holds no series called name (no counter, no definition, no
// series numbered by passes), unless create. On a device whose hub cannot
// be reached the vault cannot tell, so it does not refuse.
func (a *app) requireSeries(ctx context.Context, v *vault.Vault, name string, create, offerCreate bool) error {
	if create || a.created {
		return nil // a vault this command created has no name to misspell
	}
	infos, err := v.SeriesNamed(ctx, name)
	switch {
	case errors.Is(err, sequence.ErrOffline), errors.Is(err, stores.ErrUnavailable):
		return nil
	case err != nil:
		return err
	case len(infos) > 0:
		return nil
	}
	return a.noSuchSeries(ctx, v, name, offerCreate)
}

// noSuchSeries is the usage error of a series the vault does not hold:
// the closest names it holds, and how to create one (when creating is what
// the command could do).
func (a *app) noSuchSeries(ctx context.Context, v *vault.Vault, name string, creating bool) error {
	all, err := v.Series(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range all {
		if len(names) == 0 || names[len(names)-1] != s.Name {
			names = append(names, s.Name)
		}
	}
	return noSuchName("series", name, v.Name(), names, creating,
		fmt.Sprintf("create it with 'noydb seq create %s' (with its --format, --period …), or pass --new", name))
}

// noSuchName words a name the vault does not know: "did you mean X?" for a
// close one, the names it knows, and the next command.
func noSuchName(kind, name, vaultName string, names []string, creating bool, create string) error {
	msg := fmt.Sprintf("no such %s %q in vault %q", kind, name, vaultName)
	if len(names) == 0 {
		msg += fmt.Sprintf(": it has no %s yet", kindPlural(kind))
	} else {
		best := strings.SplitN(closest(name, names, len(names)), ", ", 2)[0]
		if editDistance(name, best) <= max(2, len([]rune(name))/3) {
			msg += fmt.Sprintf("; did you mean %s?", best)
		}
		msg += fmt.Sprintf(" (%s there: %s)", kindPlural(kind), closest(name, names, maxVaultHint))
	}
	if creating {
		msg += "; if " + name + " is new, " + create
	}
	return &usageError{msg: msg}
}

func kindPlural(kind string) string {
	if kind == "series" {
		return "series"
	}
	return kind + "s"
}

// collectionPrefix is the store prefix of a collection's records, by the
// layout the vault package documents ("v/<name>/<collection>/<id>").
func (a *app) collectionPrefix(collection string) string {
	return "v/" + a.vaultName + "/" + collection + "/"
}

// collectionExists reports whether the vault has seen collection: it holds
// a record of it (one key read), or else its ledger records a write in it
// (records written and all deleted since), which reads the ledger.
func (a *app) collectionExists(ctx context.Context, v *vault.Vault, collection string) (bool, error) {
	for _, err := range stores.ListUnder(ctx, a.store, a.collectionPrefix(collection)) {
		return err == nil, err
	}
	if a.hub != nil {
		// A device may not hold yet what its hub does ('noydb sync'
		// brings it); a hub that cannot be reached cannot tell.
		if a.hub.offline != nil {
			return true, nil
		}
		for _, err := range stores.ListUnder(ctx, a.hub.store, a.collectionPrefix(collection)) {
			return err == nil, err
		}
	}
	for e, err := range v.Audit().Read(ctx, 1) {
		if err != nil {
			return false, err
		}
		if e.Collection == collection && (e.Kind == ledger.RecordPut || e.Kind == ledger.RecordDelete) {
			return true, nil
		}
	}
	return false, nil
}

// maxCollectionScan bounds the keys read to name a vault's collections in
// a hint: the listing reads every record's key.
const maxCollectionScan = 200_000

// collectionNames lists the collections the vault holds records of, in
// order, reading at most maxCollectionScan keys.
func (a *app) collectionNames(ctx context.Context) ([]string, error) {
	prefix := "v/" + a.vaultName + "/"
	var names []string
	n := 0
	for it, err := range stores.ListUnder(ctx, a.store, prefix) {
		if err != nil {
			return nil, err
		}
		if n++; n > maxCollectionScan {
			break
		}
		coll, _, ok := strings.Cut(it.Key[len(prefix):], "/")
		if !ok || coll == "" || strings.HasPrefix(coll, "_") {
			continue
		}
		if len(names) == 0 || names[len(names)-1] != coll {
			names = append(names, coll)
		}
	}
	return names, nil
}

// requireCollection fails with a usage error naming the closest
// collections when the vault holds no record of collection, unless create
// (a write with --new). writing says whether the command would write.
func (a *app) requireCollection(ctx context.Context, v *vault.Vault, collection string, create, writing bool) error {
	if create || a.created {
		return nil // a vault this command created has no name to misspell
	}
	if err := vault.CheckCollectionName(collection); err != nil {
		return nil // the vault's own refusal names what is wrong
	}
	ok, err := a.collectionExists(ctx, v, collection)
	if err != nil || ok {
		return err
	}
	names, err := a.collectionNames(ctx)
	if err != nil {
		return err
	}
	return noSuchName("collection", collection, v.Name(), names, writing,
		"pass --new to create it with this record")
}
