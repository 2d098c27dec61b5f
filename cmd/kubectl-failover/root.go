package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/internal/version"
)

// rootOptions are shared by every subcommand.
type rootOptions struct {
	flags            *genericclioptions.ConfigFlags
	streams          genericiooptions.IOStreams
	kubefedNamespace string
	now              func() time.Time
	client           client.Client // built on first use
}

// NewRootCommand builds `kubectl failover` and its subcommands.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newRootCommand(streams, genericclioptions.NewConfigFlags(true))
}

// newRootCommand takes the kubeconfig flags, so tests can wrap the REST
// config (e.g. count requests).
func newRootCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags) *cobra.Command {
	o := &rootOptions{flags: flags, streams: streams, now: time.Now}
	cmd := &cobra.Command{
		Use:   "kubectl-failover",
		Short: "Show what fedfailover sees and decides in a kubefed federation",
		Long: "kubectl failover reads only the host cluster (FailoverPolicy status, KubeFedClusters,\n" +
			"ReplicaSchedulingPreferences, Cluster API Machines), so it works while members are down.",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl failover"},
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl completes plugins through kubectl_complete-failover; a
		// `completion` script for the plugin binary itself is rarely wanted.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
		// --version, as `kubectl failover version`.
		Version: version.Get().Version,
	}
	cmd.SetVersionTemplate(versionLine() + "\n")
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	o.flags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&o.kubefedNamespace, "kubefed-namespace", cli.DefaultKubefedNamespace,
		"Namespace of the KubeFedCluster objects in the host cluster.")
	_ = cmd.RegisterFlagCompletionFunc("context", o.completeContexts)
	cmd.AddCommand(newStatusCommand(o), newExplainCommand(o), newPlanCommand(o), newMemberRBACCommand(o), newVersionCommand())
	return cmd
}

// restConfig loads the host cluster's kubeconfig, turning problems into
// messages that say what to fix.
// hostConfig is the host's REST config and the scheme of every kind the
// CLI reads.
func (o *rootOptions) hostConfig() (*rest.Config, *runtime.Scheme, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, nil, err
	}
	s, err := scheme.New()
	if err != nil {
		return nil, nil, err
	}
	return cfg, s, nil
}

func (o *rootOptions) restConfig() (*rest.Config, error) {
	cfg, err := o.flags.ToRESTConfig()
	switch {
	case err != nil && (clientcmd.IsContextNotFound(err) || strings.Contains(err.Error(), fmt.Sprintf("context %q does not exist", ptrValue(o.flags.Context)))):
		return nil, fmt.Errorf("unknown context %q: list the contexts with `kubectl config get-contexts`: %w", ptrValue(o.flags.Context), err)
	case err != nil && clientcmd.IsEmptyConfig(err):
		return nil, fmt.Errorf("no kubeconfig found: pass --kubeconfig or set KUBECONFIG to the host cluster's kubeconfig: %w", err)
	case err != nil:
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	return cfg, nil
}

// reader connects to the host cluster.
func (o *rootOptions) reader() (client.Client, error) {
	if o.client != nil {
		return o.client, nil
	}
	cfg, s, err := o.hostConfig()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to the host cluster %s: %w", cfg.Host, err)
	}
	o.client = c
	return c, nil
}

// contextReader connects to another cluster of the user's kubeconfig (the
// same files as the host's, --kubeconfig or KUBECONFIG), by context name:
// a Cluster API management cluster.
func (o *rootOptions) contextReader(name string) (client.Client, error) {
	loading := o.flags.ToRawKubeConfigLoader().ConfigAccess().(*clientcmd.ClientConfigLoadingRules)
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	switch {
	case err != nil && (clientcmd.IsContextNotFound(err) || strings.Contains(err.Error(), fmt.Sprintf("context %q does not exist", name))):
		return nil, fmt.Errorf("unknown --management-context %q: list the contexts with `kubectl config get-contexts`: %w", name, err)
	case err != nil:
		return nil, fmt.Errorf("loading kubeconfig for --management-context %q: %w", name, err)
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to the management cluster %s (context %s): %w", cfg.Host, name, err)
	}
	return c, nil
}

// source says what to read: RSPs of one namespace when -n is given, else
// of all namespaces.
func (o *rootOptions) source(cmd *cobra.Command) (cli.Source, error) {
	c, err := o.reader()
	if err != nil {
		return cli.Source{}, err
	}
	src := cli.Source{Reader: c, KubefedNamespace: o.kubefedNamespace}
	if cmd.Flags().Changed("namespace") {
		src.Namespace = ptrValue(o.flags.Namespace)
	}
	return src, nil
}

func (o *rootOptions) gather(ctx context.Context, cmd *cobra.Command) (*cli.Snapshot, error) {
	src, err := o.source(cmd)
	if err != nil {
		return nil, err
	}
	return cli.Gather(ctx, src, o.now())
}

func ptrValue(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
