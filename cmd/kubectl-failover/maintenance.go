package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/cli"
)

func newMaintenanceCommand(root *rootOptions) *cobra.Command {
	printFlags := cli.NewPrintFlags()
	cmd := &cobra.Command{
		Use:   "maintenance [CLUSTER]",
		Short: "Show the planned maintenance of members: accepted or refused, and how far each drain is",
		Long: "maintenance lists the MemberMaintenance objects (all, or those of one member) with what the\n" +
			"manager wrote in their status: whether the request is accepted (refused when the other members\n" +
			"lack room for the member's replicas, by the same N+1 figures as `plan --fail`), and the drain's\n" +
			"progress, e.g. \"12 of 30 replicas moved off member1, 3 not Ready yet on member2\".\n" +
			"To start a maintenance, create a MemberMaintenance; to end it, delete it (docs/rebalance.md).",
		Example:           "  kubectl failover maintenance\n  kubectl failover maintenance member1 -o wide",
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: root.completeMembers,
		RunE: func(cmd *cobra.Command, args []string) error {
			output, err := printFlags.Output()
			if err != nil {
				return err
			}
			c, err := root.reader()
			if err != nil {
				return err
			}
			mms, err := cli.GatherMaintenances(cmd.Context(), c)
			if err != nil {
				return err
			}
			member := ""
			if len(args) == 1 {
				member = args[0]
			}
			v := cli.BuildMaintenance(mms, member, root.now())
			return output.Print(root.streams.Out, cli.NewMaintenanceReport(v), func(w io.Writer, wide bool) error {
				return cli.RenderMaintenance(w, v, wide)
			})
		},
	}
	printFlags.AddFlags(cmd)
	return cmd
}
