package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// numberCmd is deferred numbering: wired when the numbering package lands.
func (a *app) numberCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "number",
		Short:  "Deferred numbering for stores without atomic compare-and-swap",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("deferred numbering is not in this build yet")
		},
	}
}
