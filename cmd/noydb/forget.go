package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/vault"
)

func (a *app) forgetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "forget",
		Short: "Erase what this device knows of a vault (its rollback pins)",
		Long: `Forget erases, from this device's state folder for --store, the record that
it has used --vault and the vault's rollback pins.

Run it only when a vault was really deleted or re-created (on this store or
by another device): until then noydb refuses to open it, so that a store
wiped or restored from an old backup cannot make it issue numbers again.
After forget, the next command opens or creates the vault as on first use,
and this device's protection starts over from what the store holds.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := vault.CheckVaultName(a.vaultName); err != nil {
				return usagef("--vault: %v", err)
			}
			dir, err := a.stateDir()
			if err != nil {
				return err
			}
			if dir == "" {
				fmt.Fprintf(a.io.out, "%s keeps no state: nothing to forget\n", redactLocation(a.storeSpec))
				return nil
			}
			used, err := vault.Used(dir, a.vaultName)
			if err != nil {
				return err
			}
			if err := vault.Forget(dir, a.vaultName); err != nil {
				return err
			}
			if err := a.forgetSync(a.vaultName); err != nil {
				return err
			}
			if used {
				fmt.Fprintf(a.io.out, "forgot vault %q on this device\n", a.vaultName)
			} else {
				fmt.Fprintf(a.io.out, "this device knew nothing of vault %q\n", a.vaultName)
			}
			return nil
		},
	}
}
