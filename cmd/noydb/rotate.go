package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/noydb-go/noydb/vault"
)

// rotateCmd is "noydb vault rotate": new data keys, and every record
// re-sealed with them, with a progress bar; --resume continues a rotation
// that a crash or an interrupt left pending.
func (a *app) rotateCmd() *cobra.Command {
	var resume bool
	c := &cobra.Command{
		Use:   "rotate",
		Short: "Make new data keys and re-seal every record with them",
		Long: `Make a new generation of data keys for --vault, wrapped for every person
with access, and re-seal every record with it (each a new revision of the
same content, recorded in the ledger). Records written from then on use the
new keys at once; reads work throughout. A person removed earlier cannot open
records re-sealed or written after this with any key they held. The ledger
and the counters stay sealed by the vault's first keys.

Re-sealing shows a progress bar on a terminal. If it is interrupted (Ctrl-C,
a crash), the rotation stays pending: run 'noydb vault rotate --resume' to
finish it (it also re-seals records another device wrote with older keys).
Only an owner rotates; an owner or a writer resumes.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := a.openVault(ctx)
			if err != nil {
				return err
			}
			var rot *vault.Rotation
			if resume {
				rot, err = v.ResumeRotation(ctx)
			} else {
				rot, err = v.RotateKeys(ctx)
			}
			if err != nil {
				return refused(err)
			}
			if err := a.waitRotation(ctx, rot); err != nil {
				return err
			}
			p := rot.Progress()
			obj := rotateJSON{Generation: p.Generation, Resealed: p.Done, Resumed: resume}
			if resume {
				return a.confirm(obj, "vault %q: every record is sealed with generation %d (%d re-sealed now)", a.vaultName, p.Generation, p.Done)
			}
			return a.confirm(obj, "keys of vault %q rotated to generation %d: %d records re-sealed", a.vaultName, p.Generation, p.Done)
		},
	}
	c.Flags().BoolVar(&resume, "resume", false, "finish a pending rotation instead of starting a new one")
	return c
}

// waitRotation shows rot's progress until it ends. An interrupt stops the
// re-sealing after its commit in progress and says how to resume.
func (a *app) waitRotation(ctx context.Context, rot *vault.Rotation) error {
	bar := a.progress("re-sealing", 0)
	defer bar.done()
	t := time.NewTicker(redrawEvery)
	defer t.Stop()
	for {
		select {
		case <-rot.Done():
			err := rot.Wait(context.Background())
			if err == nil {
				p := rot.Progress()
				bar.total = p.Total
				bar.set(p.Done)
				return nil
			}
			return fmt.Errorf("%w (the rotation is pending: run 'noydb vault rotate --resume')", err)
		case <-ctx.Done():
			rot.Stop()
			return fmt.Errorf("%w (the rotation is pending: run 'noydb vault rotate --resume')", errors.Join(ctx.Err(), context.Cause(ctx)))
		case <-t.C:
			p := rot.Progress()
			bar.total = p.Total
			bar.set(p.Done)
		}
	}
}
