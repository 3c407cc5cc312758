package main

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/ledger"
	"github.com/noydb-go/noydb/vault"
)

// personJSON is one person as 'people list --json' prints it.
type personJSON struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	GrantedBy string `json:"granted_by,omitempty"`
	GrantedAt string `json:"granted_at,omitempty"`
	// Collections lists the only collections the person may use; empty: all.
	Collections []string `json:"collections,omitempty"`
	Revoked     bool     `json:"revoked"`
	Identity    bool     `json:"identity"`
	Legacy      bool     `json:"legacy"`
}

func (a *app) peopleCmd() *cobra.Command {
	p := &cobra.Command{
		Use:   "people",
		Short: "List, add and remove the people who can open a vault",
		Long: `Who can open --vault, and with which role: owner (everything, people
included), writer (records and numbers) or reader (read only).

Only an owner adds and removes people. A writer or reader may be limited to
some collections (people add --collections): they cannot read the others,
even with a copy of the store and every key they hold. Removing a person
makes their secret or key stop opening the vault and rotates the keys; it
cannot make them forget what they read before.`,
		Args: a.noArgs,
		RunE: a.groupRun,
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the vault's people, their roles, and who granted them",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVaultToRead(cmd.Context())
			if err != nil {
				return err
			}
			people, err := v.People(cmd.Context())
			if err != nil {
				return err
			}
			rows := make([]personJSON, len(people))
			for i, p := range people {
				rows[i] = personJSON{Name: p.Name, Role: p.Role.String(), GrantedBy: p.GrantedBy,
					Collections: p.Collections, Revoked: p.Revoked, Identity: p.Identity, Legacy: p.Legacy}
				if !p.GrantedAt.IsZero() {
					rows[i].GrantedAt = p.GrantedAt.Format(time.RFC3339)
				}
			}
			if a.json {
				return a.printJSON(rows)
			}
			tw := tabwriter.NewWriter(a.io.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tCOLLECTIONS\tGRANTED BY\tGRANTED AT\tSTATUS")
			for _, r := range rows {
				status := "active"
				switch {
				case r.Revoked:
					status = "removed"
				case r.Legacy:
					status = "active (old keyring layout: run 'noydb vault passwd')"
				}
				cols := "all"
				if len(r.Collections) > 0 {
					cols = strings.Join(r.Collections, ",")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Role, cols, dash(r.GrantedBy), dash(r.GrantedAt), status)
			}
			return tw.Flush()
		},
	}
	var role, publicKey, newSecretFile string
	var collections []string
	add := &cobra.Command{
		Use:   "add USER --role owner|writer|reader",
		Short: "Give a person access, with a secret or their public key",
		Long: `Give USER access to --vault with --role. The person opens the vault with a
secret you choose together (asked twice on a terminal, or read from
--new-secret-file), or, with --public-key, with the private key that only
they hold (the text form noydb-x25519-public:…).

--collections limits a writer or reader to those collections (comma
separated): the keys are rotated and every record re-sealed before the
command returns ('noydb vault rotate --resume' finishes the re-sealing if
interrupted), so that the person holds no key opening another collection.
They still see the ledger's metadata (collection names, ids, numbers).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("role") {
				return usagef("--role is required: owner, writer or reader")
			}
			r, err := vault.ParseRole(role)
			if err != nil {
				return usagef("--role: %v", err)
			}
			if err := vault.CheckCollectionName(args[0]); err != nil {
				return usagef("USER %q: %v", args[0], err)
			}
			if err := checkCollectionsFlag(collections); err != nil {
				return err
			}
			if len(collections) > 0 && r == vault.RoleOwner {
				return usagef("--collections: an owner cannot be limited to some collections")
			}
			var cred vault.Credential
			if publicKey != "" {
				if newSecretFile != "" {
					return usagef("--public-key and --new-secret-file exclude each other")
				}
				pub, err := crypto.ParsePublicKey(publicKey)
				if err != nil {
					return usagef("--public-key: %v", err)
				}
				cred = vault.PublicKey(pub)
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			if publicKey == "" {
				s, err := a.newSecret("--new-secret-file", newSecretFile, fmt.Sprintf("Secret for %q in vault %q: ", args[0], a.vaultName))
				if err != nil {
					return err
				}
				cred = vault.Secret(s)
				clear(s)
			}
			if err := v.Grant(cmd.Context(), args[0], cred, r, collections...); err != nil {
				return refused(err)
			}
			obj := personChangeJSON{User: args[0], Role: r.String(), Collections: collections}
			if len(collections) > 0 {
				return a.confirm(obj, "%s is a %s of vault %q, limited to %s", args[0], r, a.vaultName, strings.Join(collections, ","))
			}
			return a.confirm(obj, "%s is a %s of vault %q", args[0], r, a.vaultName)
		},
	}
	add.Flags().StringVar(&role, "role", "", "owner, writer or reader (required)")
	add.Flags().StringVar(&publicKey, "public-key", "", "the person's X25519 public key (noydb-x25519-public:…) instead of a secret")
	add.Flags().StringVar(&newSecretFile, "new-secret-file", "", "read the person's secret from this file (else a prompt)")
	add.Flags().StringSliceVar(&collections, "collections", nil, "limit the person to these collections (comma separated; not for an owner)")
	var keepKeys bool
	remove := &cobra.Command{
		Use:   "remove USER",
		Short: "Remove a person's access",
		Long: `Remove USER's access to --vault: their secret or key no longer opens it.
The keys are rotated at once (see 'noydb vault rotate'): records written or
re-sealed afterwards do not open with any key they held. It cannot make them
forget what they read before. --keep-keys skips the rotation (needed on a
store without transactions, such as file:). The last owner cannot be removed,
and nobody removes themselves: another owner does. Removing a person who
was removed already says so and changes nothing (exit 0).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := vault.CheckCollectionName(args[0]); err != nil {
				return usagef("USER %q: %v", args[0], err)
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			var opts []vault.RevokeOption
			if keepKeys {
				opts = append(opts, vault.RevokeWithoutRotation())
			}
			if err := v.Revoke(cmd.Context(), args[0], opts...); err != nil {
				// Revoke's ErrNotFound is "no such person" or "already
				// revoked": the keyring tells them apart. Removed before is
				// what a repeated remove asked for; it wrote nothing.
				if errors.Is(err, vault.ErrNotFound) {
					if gone, perr := wasRemoved(cmd.Context(), v, args[0]); perr == nil && gone {
						return a.confirm(personChangeJSON{User: args[0], Removed: true, Unchanged: true},
							"%s was already removed from vault %q: nothing changed", args[0], a.vaultName)
					}
				}
				return refused(err)
			}
			if rot := v.Rotation(); rot != nil {
				if err := a.waitRotation(cmd.Context(), rot); err != nil { // rotate.go
					return err
				}
			}
			return a.confirm(personChangeJSON{User: args[0], Removed: true}, "removed %s from vault %q", args[0], a.vaultName)
		},
	}
	remove.Flags().BoolVar(&keepKeys, "keep-keys", false, "do not rotate the keys (the removed person's keys keep opening records)")
	var setCols []string
	var allCols bool
	limit := &cobra.Command{
		Use:   "collections USER (--collections a,b | --all)",
		Short: "Change the collections a person may use",
		Long: `Change the collections USER (a writer or reader) may use in --vault:
--collections names them, --all gives every collection. Adding collections
wraps their keys for the person; taking any away rotates the keys and
re-seals every record before the command returns, so that the person's keys
no longer open the records of the collections taken away.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := vault.CheckCollectionName(args[0]); err != nil {
				return usagef("USER %q: %v", args[0], err)
			}
			if allCols == (len(setCols) > 0) {
				return usagef("give either --collections or --all")
			}
			if err := checkCollectionsFlag(setCols); err != nil {
				return err
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			if err := v.SetCollections(cmd.Context(), args[0], setCols...); err != nil {
				return refused(err)
			}
			if allCols {
				return a.confirm(personChangeJSON{User: args[0], All: true}, "%s may use every collection of vault %q", args[0], a.vaultName)
			}
			return a.confirm(personChangeJSON{User: args[0], Collections: setCols},
				"%s may use %s of vault %q", args[0], strings.Join(setCols, ","), a.vaultName)
		},
	}
	limit.Flags().StringSliceVar(&setCols, "collections", nil, "the collections the person may use (comma separated)")
	limit.Flags().BoolVar(&allCols, "all", false, "the person may use every collection")
	p.AddCommand(list, add, remove, limit)
	return p
}

func (a *app) vaultCmd() *cobra.Command {
	vc := &cobra.Command{
		Use:   "vault",
		Short: "Manage your access to a vault and its keys (passwd, recovery codes, identities, rotate)",
		Args:  a.noArgs,
		RunE:  a.groupRun,
	}
	var newSecretFile string
	passwd := &cobra.Command{
		Use:   "passwd",
		Short: "Change the secret that opens the vault for --user",
		Long: `Change the secret that opens --vault for --user: the vault opens with the
current secret (as every command does), then the new one is asked twice on a
terminal or read from --new-secret-file. A vault made before roles existed
gets its keyring entry rewritten in the current layout, which an owner needs
to add people: give the current secret as the new one to do only that. The
current secret as the new one is otherwise refused (nothing changes).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The current secret opens the vault and proves who changes it:
			// asked once, used for both.
			if a.recovering() {
				return usagef("--recover sets a new secret itself: run 'noydb vault recover' instead")
			}
			if err := a.checkSecretFile(); err != nil {
				return err
			}
			old, err := a.secret(a.vaultName, false)
			if err != nil {
				return err
			}
			defer clear(old)
			a.fixedSecret = old
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			s, err := a.newSecret("--new-secret-file", newSecretFile, fmt.Sprintf("New secret for vault %q (user %q): ", a.vaultName, a.user))
			if err != nil {
				return err
			}
			defer clear(s)
			if subtle.ConstantTimeCompare(old, s) == 1 {
				return a.samePasswd(cmd.Context(), v, old)
			}
			if err := v.ChangeSecret(cmd.Context(), old, s); err != nil {
				return refused(err)
			}
			if a.agentID != nil {
				// The change made a new key pair: the agent's opens no more.
				fmt.Fprintf(a.io.err, "note: the agent still holds the key of the old secret, which opens no more: run 'noydb unlock' again (or 'noydb lock')\n")
			}
			return a.confirm(accessJSON{User: a.user, SecretChanged: true}, "secret of %s in vault %q changed", a.user, a.vaultName)
		},
	}
	passwd.Flags().StringVar(&newSecretFile, "new-secret-file", "", "read the new secret from this file (else a prompt)")
	vc.AddCommand(passwd)
	vc.AddCommand(a.recoveryCmds()...)
	vc.AddCommand(a.rotateCmd()) // rotate.go
	return vc
}

// samePasswd is 'vault passwd' given the current secret as the new one:
// a keyring entry of layout version 1 is rewritten in the current layout
// (what an owner of such a vault needs to add people); any other is left
// alone, and the command is a usage error saying nothing changed.
func (a *app) samePasswd(ctx context.Context, v *vault.Vault, secret []byte) error {
	people, err := v.People(ctx)
	if err != nil {
		return err
	}
	for _, p := range people {
		if p.Name != a.user || !p.Legacy {
			continue
		}
		if err := v.UpgradeKeyring(ctx, secret); err != nil {
			return refused(err)
		}
		return a.confirm(accessJSON{User: a.user, KeyringUpgraded: true}, "keyring entry of %s in vault %q rewritten in the current layout; the secret is unchanged", a.user, a.vaultName)
	}
	return usagef("the new secret is the current one: nothing was changed")
}

// newSecret reads a new secret from file, named by flag (checked like
// --secret-file) or, on a terminal, asks for it twice.
func (a *app) newSecret(flag, file, prompt string) ([]byte, error) {
	if file != "" {
		return readFlagFile(flag, "the new secret", file, a.insecureSecretFile)
	}
	if !a.io.inTerminal || a.io.readPassword == nil {
		return nil, fmt.Errorf("no new secret: pass %s, or run on a terminal to be asked", flag)
	}
	s, err := a.ask(prompt)
	if err != nil {
		return nil, err
	}
	again, err := a.ask("Repeat it: ")
	if err != nil {
		clear(s)
		return nil, err
	}
	same := bytes.Equal(s, again)
	clear(again)
	if !same {
		clear(s)
		return nil, errors.New("the two secrets differ: nothing was changed; try again")
	}
	return s, nil
}

// checkCollectionsFlag checks --collections as typed: names, and how many.
func checkCollectionsFlag(cols []string) error {
	for _, c := range cols {
		if err := vault.CheckCollectionName(c); err != nil {
			return usagef("--collections %q: %v", c, err)
		}
	}
	if len(cols) > ledger.MaxGrantCollections {
		return usagef("--collections: %d collections, at most %d", len(cols), ledger.MaxGrantCollections)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// wasRemoved reports whether the keyring of v lists user as removed.
func wasRemoved(ctx context.Context, v *vault.Vault, user string) (bool, error) {
	people, err := v.People(ctx)
	if err != nil {
		return false, err
	}
	for _, p := range people {
		if p.Name == user {
			return p.Revoked, nil
		}
	}
	return false, nil
}
