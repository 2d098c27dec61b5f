package main

import (
	"github.com/spf13/cobra"

	"github.com/fedfailover/fedfailover/internal/memberrbac"
)

func newMemberRBACCommand(root *rootOptions) *cobra.Command {
	var o memberrbac.Options
	cmd := &cobra.Command{
		Use:   "member-rbac [-n NAMESPACE] [--name NAME] [--member CLUSTER]",
		Short: "Print the least-privilege ServiceAccount and roles to apply in a member cluster (reads nothing)",
		Long: "member-rbac prints what to apply in a member cluster so that fedfailover acts there with\n" +
			"exactly the permissions it uses, instead of kubefed's join credentials (usually cluster-admin):\n" +
			"a ServiceAccount (in -n NAMESPACE, default " + memberrbac.DefaultNamespace + "), a ClusterRole and a Role for Events\n" +
			"in default with their bindings, and a token Secret the member fills. The header says how to give\n" +
			"fedfailover that token in the host: a Secret in the kubefed namespace labelled\n" +
			"failover.fedfailover.io/credentials-for=CLUSTER, named by the KubeFedCluster's annotation\n" +
			"failover.fedfailover.io/credentials-secret. The same manifest, with the default names, is the\n" +
			"kustomize base config/member.",
		Example: "  kubectl failover member-rbac | kubectl --context member1 apply -f -\n" +
			"  kubectl failover member-rbac -n ops --name fedfailover --member member1",
		Args: cobra.NoArgs,
		// Reads nothing: works without a kubeconfig.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("namespace") {
				o.Namespace = ptrValue(root.flags.Namespace)
			}
			o.KubefedNamespace = root.kubefedNamespace
			m, err := memberrbac.Manifest(o)
			if err != nil {
				return err
			}
			_, err = root.streams.Out.Write(m)
			return err
		},
	}
	cmd.Flags().StringVar(&o.Name, "name", memberrbac.DefaultName,
		"Name of the ServiceAccount, the ClusterRole, the Role and their bindings (the token Secret is NAME-token).")
	cmd.Flags().StringVar(&o.Member, "member", "",
		"The member's KubeFedCluster name in the host, to fill in the host-side commands of the header.")
	_ = cmd.RegisterFlagCompletionFunc("member", root.completeMembers)
	return cmd
}
