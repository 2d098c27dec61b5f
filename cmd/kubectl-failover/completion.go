package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/cli"
)

// Shell completion. Cobra completes subcommands and flags by itself; these
// functions add what only the kubeconfig and the host know: contexts,
// member clusters and their nodes. kubectl (1.26+) completes a plugin by
// running kubectl_complete-failover, which calls `kubectl-failover
// __complete ARGS...` (cobra's completion entry point).

// completionTimeout bounds the host reads behind one TAB: a host that does
// not answer must not hang the shell.
const completionTimeout = 5 * time.Second

func (o *rootOptions) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	cfg, err := o.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var names []string
	for name := range cfg.Contexts {
		if strings.HasPrefix(name, toComplete) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeMembers completes a member cluster name (plan --fail/--full).
func (o *rootOptions) completeMembers(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	ctx, cancel := completionContext(cmd)
	defer cancel()
	s, err := o.gather(ctx, cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(s.MemberNames(), "", toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeNodes completes CLUSTER/NODE (explain node): first the member
// with a trailing slash (no space, the node follows), then its nodes.
func (o *rootOptions) completeNodes(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := completionContext(cmd)
	defer cancel()
	s, err := o.gather(ctx, cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	cluster, _, found := strings.Cut(toComplete, "/")
	if !found {
		var out []string
		for _, m := range withPrefix(s.MemberNames(), "", toComplete) {
			out = append(out, m+"/")
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	c, err := o.reader()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	nodes, err := cli.NodeNames(ctx, c, s, cluster)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	return withPrefix(nodes, cluster+"/", toComplete), cobra.ShellCompDirectiveNoFileComp
}

// withPrefix returns prefix+name for the names that complete toComplete.
func withPrefix(names []string, prefix, toComplete string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(prefix+n, toComplete) {
			out = append(out, prefix+n)
		}
	}
	return out
}

func completionContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, completionTimeout)
}
