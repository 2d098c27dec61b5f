package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/cli"
)

type statusOptions struct {
	*rootOptions
	printFlags *cli.PrintFlags
	output     *cli.Output
	watch      bool
}

func newStatusCommand(root *rootOptions) *cobra.Command {
	o := &statusOptions{rootOptions: root, printFlags: cli.NewPrintFlags()}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Members, policies, RSPs, node recoveries and recent decisions",
		Example: "  kubectl failover status\n  kubectl failover status -o wide\n" +
			"  kubectl failover status -o yaml\n  kubectl failover status --watch\n" +
			"  kubectl failover status -o jsonpath='{.members[?(@.connected==false)].name}'\n" +
			"  kubectl failover status --watch -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.output, err = o.printFlags.Output(); err != nil {
				return err
			}
			if o.watch {
				return o.watchStatus(cmd)
			}
			s, err := o.gather(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			return o.print(o.streams.Out, s)
		},
	}
	o.printFlags.AddFlags(cmd)
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false,
		"Print the status again whenever an object it shows changes, until Ctrl-C (with -o json, one document per line).")
	// Kept so scripts that pass it still run: --watch no longer polls.
	cmd.Flags().Duration("interval", 2*time.Second, "Ignored: --watch redraws on every change.")
	_ = cmd.Flags().MarkDeprecated("interval", "--watch uses the watch API and redraws on every change")
	return cmd
}

func (o *statusOptions) print(w io.Writer, s *cli.Snapshot) error {
	v := cli.BuildStatus(s)
	return o.output.Print(w, cli.NewStatusReport(v), func(w io.Writer, wide bool) error { return cli.RenderStatus(w, v, wide) })
}
