package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/version"
)

// versionLine is what `kubectl failover version` and `--version` print.
func versionLine() string { return version.Line("kubectl-failover") }

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, source revision and Go version",
		Args:  cobra.NoArgs,
		// Reads nothing: works without a kubeconfig.
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
}
