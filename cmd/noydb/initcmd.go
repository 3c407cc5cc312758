package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/stores"
)

// initCmd creates a vault: the one command that does so without --create.
func (a *app) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create a vault",
		Long: `Create the vault named by --vault on --store (creating the store too), with
--user as its first user and the secret as that user's. Every other command
refuses a vault that does not exist, unless --create is given, so a misspelt
--vault or a wrong --store never silently starts a new series from 1.

It prints "created vault NAME on STORE" and which user it made the vault's
first owner (--user, $NOYDB_USER, the config file's user, else $USER, else
"owner") and how to open it as them, or, when the vault exists and the
secret opens it, that there is nothing to do. With --hub it says that the
vault joined the hub: created there too, or, when the hub holds the vault
already, fetched from it (its people and keys; 'noydb sync' brings the
records). With --json it prints {"vault", "store", "user", "user_from",
"created"}, and "fetched" or "joined" when true.`,
		Example: `  noydb init --vault books
  noydb --vault books seq next invoices`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			a.create, a.ownsHubNote = true, true
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Vault    string `json:"vault"`
					Store    string `json:"store"`
					User     string `json:"user"`
					UserFrom string `json:"user_from"`
					Created  bool   `json:"created"`
					Fetched  bool   `json:"fetched,omitempty"`
					Joined   bool   `json:"joined,omitempty"`
				}{v.Name(), a.spec.String(), a.user, a.userFrom, a.created, a.fetched, a.joined})
			}
			if a.created {
				defer func() {
					if err == nil {
						_, err = fmt.Fprintf(a.io.out, "its first user, an owner, is %s (%s): commands open it as %s while %s is its only user; "+
							"after 'noydb people add', pass --user %s, or keep it with 'noydb config set user %s'\n",
							a.user, a.userFrom, a.user, a.user, a.user, a.user)
					}
				}()
			}
			switch {
			case a.fetched:
				_, err = fmt.Fprintf(a.io.out, "vault %s already exists on hub %s: fetched its people and keys to %s and joined the hub; 'noydb sync' brings its records\n",
					v.Name(), a.hub, a.spec)
			case a.created && a.joined:
				_, err = fmt.Fprintf(a.io.out, "created vault %s on %s and joined hub %s (the vault is on the hub too); 'noydb sync' keeps them in step\n",
					v.Name(), a.spec, a.hub)
			case a.created && a.hub != nil:
				_, err = fmt.Fprintf(a.io.out, "created vault %s on %s, a device of hub %s; it joins the hub when the hub can be reached\n",
					v.Name(), a.spec, a.hub)
			case a.created:
				_, err = fmt.Fprintf(a.io.out, "created vault %s on %s\n", v.Name(), a.spec)
			case a.joined:
				_, err = fmt.Fprintf(a.io.out, "vault %s already exists on %s: it joined hub %s now, and takes its numbers there; 'noydb sync' pushes its records\n",
					v.Name(), a.spec, a.hub)
			case a.hub != nil:
				_, err = fmt.Fprintf(a.io.out, "vault %s already exists on %s, a device of hub %s: nothing to do\n", v.Name(), a.spec, a.hub)
			default:
				_, err = fmt.Fprintf(a.io.out, "vault %s already exists on %s: nothing to do\n", v.Name(), a.spec)
			}
			return err
		},
	}
}

// vaultNames lists the vaults of st, by their header keys ("v/<name>/_header").
// The library has no listing of vaults, so it lists every key under "v/":
// it runs only when a command names a vault that does not exist.
func vaultNames(ctx context.Context, st stores.Store) ([]string, error) {
	var names []string
	for it, err := range stores.ListUnder(ctx, st, "v/") {
		if err != nil {
			return nil, err
		}
		name, ok := strings.CutSuffix(it.Key[len("v/"):], "/_header")
		if ok && name != "" && !strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	return names, nil
}

// maxVaultHint is how many vault names the hint of missingVault shows.
const maxVaultHint = 5

// missingVault is the error for a vault that does not exist on a store that
// holds others: it names them, closest to the name asked for first.
func missingVault(ctx context.Context, st stores.Store, spec storeSpec, name string) error {
	names, err := vaultNames(ctx, st)
	if err != nil {
		return err
	}
	hint := "the store has no vault yet: create one with 'noydb init --vault " + name + "'"
	if len(names) > 0 {
		hint = "vaults there: " + closest(name, names, maxVaultHint) + " (check --vault, or create it with 'noydb init' or --create)"
	}
	return fmt.Errorf("vault %q does not exist on %s; %s", name, spec, hint)
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
