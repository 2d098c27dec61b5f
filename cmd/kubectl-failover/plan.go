package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/cli"
)

func newPlanCommand(root *rootOptions) *cobra.Command {
	var fail, full string
	printFlags := cli.NewPrintFlags()
	cmd := &cobra.Command{
		Use:   "plan (--fail CLUSTER | --full CLUSTER)",
		Short: "Preview how fedfailover would change RSPs if a member failed or filled up (writes nothing)",
		Long: "plan runs fedfailover's own RSP planner on the host's current state as if a member\n" +
			"had failed (--fail) or run out of capacity (--full), and prints the placement it would write.\n" +
			"The host does not see member capacity: other healthy members are assumed to have room,\n" +
			"and a --full member is assumed to run none of the workload's replicas (worst case).\n" +
			"With --fail it also prints, per RSP, how many replicas the other members would have no room for\n" +
			"(N+1 readiness), from the room the manager last published in the policy's status.failoverReadiness.",
		Example: "  kubectl failover plan --fail member2\n  kubectl failover plan --full member1 -o wide\n" +
			"  kubectl failover plan --fail member2 -o name",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			output, err := printFlags.Output()
			if err != nil {
				return err
			}
			sc := cli.Scenario{Cluster: fail}
			if full != "" {
				sc = cli.Scenario{Cluster: full, Full: true}
			}
			s, err := root.gather(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			v, err := cli.BuildPlan(s, sc)
			if err != nil {
				return err
			}
			return output.Print(root.streams.Out, cli.NewPlanReport(v), func(w io.Writer, wide bool) error { return cli.RenderPlan(w, v, wide) })
		},
	}
	printFlags.AddFlags(cmd)
	cmd.Flags().StringVar(&fail, "fail", "", "Member cluster assumed failed (disconnected or not Ready).")
	cmd.Flags().StringVar(&full, "full", "", "Member cluster assumed out of capacity.")
	_ = cmd.RegisterFlagCompletionFunc("fail", root.completeMembers)
	_ = cmd.RegisterFlagCompletionFunc("full", root.completeMembers)
	cmd.MarkFlagsMutuallyExclusive("fail", "full")
	cmd.MarkFlagsOneRequired("fail", "full")
	return cmd
}
