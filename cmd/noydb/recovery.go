package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/crypto"
	"github.com/noydb-go/noydb/vault"
)

// recoveryWarning is printed (to standard error) with new recovery codes.
const recoveryWarning = `Store these recovery codes somewhere safe, away from this computer (on paper,
or in a password manager). They are shown only this once. Each opens the
vault once, with a new secret, if you lose yours:
  noydb vault recover
which asks for the code (or reads $NOYDB_RECOVERY_CODE or --recovery-code-file).
Anyone holding one can do so: keep them as safe as the secret itself.`

// recoveryCmds are the vault subcommands of recovery codes and identities.
func (a *app) recoveryCmds() []*cobra.Command {
	var n int
	codes := &cobra.Command{
		Use:   "recovery-codes",
		Short: "Make one-time recovery codes for --user (replacing earlier ones)",
		Long: `Make -n one-time recovery codes for --user in --vault and print them once.
Each opens the vault once, with a new secret, if the secret is lost ('noydb
vault recover'). A new set replaces the earlier one: its unused codes stop
working. Only a person who opens with a secret has recovery codes.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n < 1 || n > vault.MaxRecoveryCodes {
				return usagef("-n %d: from 1 to %d", n, vault.MaxRecoveryCodes)
			}
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			codes, err := v.RecoveryCodes(cmd.Context(), n)
			if err != nil {
				return refused(err)
			}
			fmt.Fprintln(a.io.err, recoveryWarning)
			if a.json {
				return a.printJSON(struct {
					Codes []string `json:"codes"`
				}{codes})
			}
			for _, c := range codes {
				fmt.Fprintln(a.io.out, c)
			}
			return nil
		},
	}
	codes.Flags().IntVarP(&n, "n", "n", 10, "how many codes (1 to 16)")

	revoke := &cobra.Command{
		Use:   "revoke-recovery-codes",
		Short: "Revoke the unused recovery codes of --user",
		Long: `Revoke every unused recovery code of --user in --vault: none of them opens
it afterwards. With none left to revoke it says so and changes nothing
(exit 0). With --json it prints {"user", "recovery_codes_revoked"}, or
{"user", "unchanged"}.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := a.openVault(cmd.Context())
			if err != nil {
				return err
			}
			// ErrNotFound is documented as "no unused codes": nothing to
			// revoke, and nothing was written.
			if err := v.RevokeRecoveryCodes(cmd.Context()); errors.Is(err, vault.ErrNotFound) {
				return a.confirm(accessJSON{User: a.user, Unchanged: true},
					"%s has no recovery codes to revoke in vault %q: nothing changed", a.user, a.vaultName)
			} else if err != nil {
				return refused(err)
			}
			return a.confirm(accessJSON{User: a.user, RecoveryCodesRevoked: true}, "recovery codes of %s in vault %q revoked", a.user, a.vaultName)
		},
	}

	var newSecretFile string
	recoverCmd := &cobra.Command{
		Use:   "recover",
		Short: "Open the vault with a recovery code and set a new secret",
		Long: `Open --vault as --user with one of their recovery codes instead of the lost
secret, and set a new secret (asked twice on a terminal, or read from
--new-secret-file). The code is used up and the old secret stops working.

The code is read like a secret, never from a flag value: from the file
named by --recovery-code-file (refused if group or others may read or
write it, unless --insecure-secret-file), else from $NOYDB_RECOVERY_CODE,
else from a prompt (no echo) when standard input is a terminal. A mistyped
code is caught by its checksum before anything is opened.

Any other command that opens the vault recovers too with the global flag
--recover (or --recovery-code-file), the new secret then coming from
--recovery-new-secret-file or a prompt:
  noydb --recover get notes n1`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.recoverFlag = true
			if err := a.checkRecoveryCode(); err != nil {
				return err
			}
			flag := "--new-secret-file"
			if newSecretFile == "" && a.recoverySecretFile != "" {
				flag, newSecretFile = "--recovery-new-secret-file", a.recoverySecretFile
			}
			s, err := a.newSecret(flag, newSecretFile, fmt.Sprintf("New secret for vault %q (user %q): ", a.vaultName, a.user))
			if err != nil {
				return err
			}
			defer clear(s)
			a.fixedSecret = s
			if _, err := a.openVault(cmd.Context()); err != nil {
				return err
			}
			return a.confirm(accessJSON{User: a.user, Recovered: true}, "vault %q recovered: the secret of %s is the new one", a.vaultName, a.user)
		},
	}
	recoverCmd.Flags().StringVar(&newSecretFile, "new-secret-file", "", "read the new secret from this file (else a prompt)")

	var out string
	keygen := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Make an identity (an X25519 key pair) to be added with --public-key",
		Long: `Write a new private identity to --out (readable by you only) and print its
public key. Give the public key to an owner, who adds you with 'noydb people
add --public-key'; then open with --identity-file FILE instead of a secret.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("--out is required")
			}
			id, err := crypto.GenerateIdentity()
			if err != nil {
				return err
			}
			defer id.Wipe()
			text, err := crypto.EncodeIdentity(id)
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(f, text); err != nil {
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			pub, err := id.PublicKey()
			if err != nil {
				return err
			}
			pubText := crypto.EncodePublicKey(pub)
			return a.confirm(struct {
				PublicKey string `json:"public_key"`
			}{pubText}, "%s", pubText)
		},
	}
	keygen.Flags().StringVar(&out, "out", "", "file to write the private identity to (must not exist)")
	return []*cobra.Command{codes, revoke, recoverCmd, keygen}
}

// identity reads --identity-file (checked like --secret-file).
func (a *app) identity() (*crypto.Identity, error) {
	b, err := readFlagFile("--identity-file", "the identity", a.identityFile, a.insecureSecretFile)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	id, err := crypto.ParseIdentity(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("--identity-file: %w", err)
	}
	return id, nil
}

// recovering reports whether the command opens with a recovery code:
// --recover, 'vault recover', or --recovery-code-file.
func (a *app) recovering() bool {
	return a.recoverFlag || a.recoveryCodeFile != ""
}

// checkOldRecoveryFlag refuses the removed --recovery-code CODE, which put
// the code in ps output and shell history, naming the way that replaced it.
func (a *app) checkOldRecoveryFlag() error {
	if a.flags == nil || !a.flags.Changed("recovery-code") {
		return nil
	}
	return oldRecoveryFlagError()
}

func oldRecoveryFlagError() error {
	return usagef("--recovery-code CODE was removed, so that a code never shows in ps output or shell history: "+
		"pass --recover (or run 'noydb vault recover') and give the code in $%s, in a file named by --recovery-code-file, or at the prompt",
		envRecoveryCode)
}

// checkRecoveryCode reads and checks the recovery code when recovering,
// before anything is opened or any key derived: a recovery with another
// way in (--secret-file, --identity-file) is a usage error, and a code
// that its checksum refuses an error. The code comes from
// --recovery-code-file, else $NOYDB_RECOVERY_CODE, else a no-echo prompt.
// A recovery writes (the new secret, the code used up), so the store is
// not opened read-only.
func (a *app) checkRecoveryCode() error {
	if !a.recovering() {
		return nil
	}
	if a.recoveryCode != "" { // read and checked already ('vault recover')
		a.readOnly = false
		return nil
	}
	if a.secretFile != "" || a.identityFile != "" {
		return usagef("--recover opens without --secret-file or --identity-file")
	}
	code, err := a.readRecoveryCode()
	if err != nil {
		return err
	}
	b, err := crypto.ParseRecoveryCode(code)
	if err != nil {
		return err
	}
	clear(b)
	a.recoveryCode = code
	a.readOnly = false
	return nil
}

// readRecoveryCode returns the recovery code from --recovery-code-file,
// else $NOYDB_RECOVERY_CODE, else a no-echo prompt on a terminal.
func (a *app) readRecoveryCode() (string, error) {
	var b []byte
	switch {
	case a.recoveryCodeFile != "":
		var err error
		if b, err = readFlagFile("--recovery-code-file", "the recovery code", a.recoveryCodeFile, a.insecureSecretFile); err != nil {
			return "", err
		}
	case a.env(envRecoveryCode) != "":
		b = []byte(a.env(envRecoveryCode))
	case a.io.inTerminal && a.io.readPassword != nil:
		fmt.Fprintf(a.io.err, "Recovery code for vault %q: ", a.vaultName)
		s, err := a.io.readPassword()
		fmt.Fprintln(a.io.err)
		if err != nil {
			return "", fmt.Errorf("read recovery code: %w", err)
		}
		b = s
	default:
		return "", fmt.Errorf("no recovery code for vault %q: set $%s, pass --recovery-code-file, or run on a terminal to be asked", a.vaultName, envRecoveryCode)
	}
	code := strings.TrimSpace(string(b))
	clear(b)
	if code == "" {
		return "", errors.New("empty recovery code: nothing was opened")
	}
	return code, nil
}

// openNamed opens the vault in a.db: with the recovery code of 'vault
// recover', else as every command does.
func (a *app) openNamed(ctx context.Context) (*vault.Vault, error) {
	if a.recoveryCode != "" {
		return a.db.RecoverVault(ctx, a.vaultName, a.recoveryCode)
	}
	return a.db.OpenVault(ctx, a.vaultName)
}
