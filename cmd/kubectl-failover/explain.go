package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/cli"
)

func newExplainCommand(root *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Explain fedfailover's decisions about an object",
	}
	cmd.AddCommand(newExplainNodeCommand(root))
	return cmd
}

func newExplainNodeCommand(root *rootOptions) *cobra.Command {
	printFlags := cli.NewPrintFlags()
	var managementContext string
	cmd := &cobra.Command{
		Use:   "node CLUSTER/NODE",
		Short: "Why a member node was or was not recovered",
		Example: "  kubectl failover explain node member1/member1-node-2\n  kubectl failover explain node member1/member1-node-2 -o json\n" +
			"  kubectl failover explain node member1/member1-node-2 -o jsonpath='{.verdict}'",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: root.completeNodes,
		RunE: func(cmd *cobra.Command, args []string) error {
			output, err := printFlags.Output()
			if err != nil {
				return err
			}
			cluster, node, ok := strings.Cut(args[0], "/")
			if !ok || cluster == "" || node == "" || strings.Contains(node, "/") {
				return fmt.Errorf("want CLUSTER/NODE (a KubeFedCluster name and a node name), got %q", args[0])
			}
			return explainNode(cmd, root, output, cluster, node, managementContext)
		},
	}
	printFlags.AddFlags(cmd)
	cmd.Flags().StringVar(&managementContext, "management-context", "",
		"Context of your kubeconfig for the Cluster API management cluster of a member whose KubeFedCluster names one "+
			"(annotation failover.fedfailover.io/capi-management-cluster): the node's Machine is read there.")
	_ = cmd.RegisterFlagCompletionFunc("management-context", root.completeContexts)
	return cmd
}

func explainNode(cmd *cobra.Command, root *rootOptions, output *cli.Output, cluster, node, managementContext string) error {
	ctx := cmd.Context()
	s, err := root.gather(ctx, cmd)
	if err != nil {
		return err
	}
	c, err := root.reader()
	if err != nil {
		return err
	}
	src := cli.MachineSource{Host: c, ManagementContext: managementContext}
	if managementContext != "" {
		if src.Management, err = root.contextReader(managementContext); err != nil {
			return err
		}
	}
	m, where, note, err := cli.FindMachine(ctx, src, s, cluster, node)
	if err != nil {
		return err
	}
	e, err := cli.BuildExplanation(s, cluster, node, m, where, note)
	if err != nil {
		return err
	}
	return output.Print(root.streams.Out, cli.NewNodeExplanation(e), func(w io.Writer, _ bool) error { return cli.RenderExplanation(w, e, s.Now) })
}
