package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/cli"
)

func newPlanCommand(root *rootOptions) *cobra.Command {
	var output, fail, full string
	cmd := &cobra.Command{
		Use:   "plan (--fail CLUSTER | --full CLUSTER)",
		Short: "Preview how fedfailover would change RSPs if a member failed or filled up (writes nothing)",
		Long: "plan runs fedfailover's own RSP planner on the host's current state as if a member\n" +
			"had failed (--fail) or run out of capacity (--full), and prints the placement it would write.\n" +
			"The host does not see member capacity: other healthy members are assumed to have room,\n" +
			"and a --full member is assumed to run none of the workload's replicas (worst case).\n" +
			"With --fail it also prints, per RSP, how many replicas the other members would have no room for\n" +
			"(N+1 readiness), from the room the manager last published in the policy's status.failoverReadiness.",
		Example: "  kubectl failover plan --fail member2\n  kubectl failover plan --full member1 -o wide",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validateOutput(output); err != nil {
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
			return cli.Print(root.streams.Out, output, v, func(w io.Writer, wide bool) error { return cli.RenderPlan(w, v, wide) })
		},
	}
	addOutputFlag(cmd, &output)
	cmd.Flags().StringVar(&fail, "fail", "", "Member cluster assumed failed (disconnected or not Ready).")
	cmd.Flags().StringVar(&full, "full", "", "Member cluster assumed out of capacity.")
	_ = cmd.RegisterFlagCompletionFunc("fail", root.completeMembers)
	_ = cmd.RegisterFlagCompletionFunc("full", root.completeMembers)
	cmd.MarkFlagsMutuallyExclusive("fail", "full")
	cmd.MarkFlagsOneRequired("fail", "full")
	return cmd
}
