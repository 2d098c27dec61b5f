// Command fedfailover-lab starts a local federation of real Kubernetes
// control planes with kwok nodes (see docs/lab.md) and injects faults into it.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fedfailover/fedfailover/internal/version"
	"github.com/fedfailover/fedfailover/test/lab"
)

func main() {
	// The lab's clients log nothing worth showing; silence controller-runtime.
	ctrllog.SetLogger(logr.Discard())
	if err := rootCmd().Execute(); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	var dir string
	root := &cobra.Command{
		Use:           "fedfailover-lab",
		Short:         "Run a local kubefed federation of real control planes with kwok nodes, and break it",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().Version,
	}
	root.SetVersionTemplate(version.Line("fedfailover-lab") + "\n")
	root.PersistentFlags().StringVar(&dir, "dir", ".lab", "lab directory (state, certificates, logs, kubeconfig)")
	open := func() (*lab.Lab, error) { return lab.Open(dir) }

	root.AddCommand(upCmd(&dir), downCmd(&dir), statusCmd(open))
	root.AddCommand(
		nodeCmd("poweroff", "Power a node off (SIGKILL its kwok) and leave evidence on its Machine", open, true),
		nodeCmd("partition", "Partition a node (SIGSTOP its kwok)", open, false),
		nodeCmd("heal", "Heal a partitioned node (SIGCONT its kwok)", open, false),
		nodeCmd("restore", "Power a node back on (restart its kwok, clear Machine evidence)", open, false),
		nodeCmd("replace", "Replace a node: delete the Node, create it fresh with a new Machine", open, false),
		clusterCmd("kill-apiserver", "SIGKILL a cluster's kube-apiserver", open),
		clusterCmd("restart-apiserver", "Start a killed kube-apiserver again", open),
		clusterCmd("exhaust", "Leave a member without room for new pods (--mode cordon|fill)", open),
		clusterCmd("unexhaust", "Undo exhaust: uncordon nodes, delete filler pods", open),
	)
	return root
}

func upCmd(dir *string) *cobra.Command {
	o := lab.Options{}
	var detach bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the lab; runs in the foreground until interrupted unless --detach",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Dir = *dir
			if detach {
				return lab.StartDetached(*dir, os.Args[1:])
			}
			return lab.Supervise(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Members, "members", 2, "number of member clusters")
	f.IntVar(&o.Nodes, "nodes", 3, "kwok nodes per member")
	f.StringVar(&o.BinDir, "bin-dir", "", "directory with the binaries from `make tools` (default <repo>/bin)")
	f.IntVar(&o.BasePort, "base-port", 0, "fixed API server ports: host=base, memberN=base+N (default: free ports)")
	f.StringVar(&o.NodeCPU, "node-cpu", "4", "allocatable CPU per node")
	f.StringVar(&o.NodeMemory, "node-memory", "16Gi", "allocatable memory per node")
	f.StringVar(&o.NodePods, "node-pods", "110", "allocatable pods per node")
	f.DurationVar(&o.NodeMonitorGracePeriod, "node-monitor-grace-period", 16*time.Second, "kube-controller-manager --node-monitor-grace-period")
	f.IntVar(&o.TolerationSeconds, "toleration-seconds", 30, "default not-ready/unreachable toleration seconds")
	f.StringVar(&o.PowerOffConditionType, "power-off-condition-type", "PowerOn", "Machine condition type written by powered-off-condition evidence")
	f.StringVar(&o.PowerOffConditionReason, "power-off-condition-reason", "PoweredOff", "reason of that condition")
	f.StringVar(&o.MachineNamespace, "machine-namespace", "default", "host namespace of CAPI Clusters and Machines")
	f.StringVar(&o.KubefedTimings, "kubefed-timings", "", "kubefed health check and delays: default (the kubefed chart's) or tuned (faster, for local iteration); default $"+lab.KubefedTimingsEnv+" or default")
	f.BoolVar(&detach, "detach", false, "start the supervisor in the background and return once the lab is ready")
	return cmd
}

func downCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop every lab process and remove the lab directory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := lab.Open(*dir)
			if errors.Is(err, lab.ErrNoLab) {
				_, _ = fmt.Fprintln(cmd.OutOrStdout(), "no lab running in", *dir)
				return os.RemoveAll(*dir)
			}
			if err != nil {
				return err
			}
			if err := l.Down(cmd.Context()); err != nil {
				return err
			}
			_, _ = fmt.Fprintln(cmd.OutOrStdout(), "lab stopped and", *dir, "removed")
			return nil
		},
	}
}

func statusCmd(open func() (*lab.Lab, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List clusters, ports, processes and their memory",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := open()
			if err != nil {
				return err
			}
			s, err := l.Status()
			if err != nil {
				return err
			}
			s.Print(cmd.OutOrStdout())
			return nil
		},
	}
}

func nodeCmd(name, short string, open func() (*lab.Lab, error), withEvidence bool) *cobra.Command {
	var evidence string
	cmd := &cobra.Command{
		Use:   name + " NODE",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			node := args[0]
			switch name {
			case "poweroff":
				ev, err := lab.ParseEvidence(evidence)
				if err != nil {
					return err
				}
				err = l.PowerOff(ctx, node, ev)
				if err != nil {
					return err
				}
			case "partition":
				err = l.Partition(node)
			case "heal":
				err = l.Heal(node)
			case "restore":
				err = l.Restore(ctx, node)
			case "replace":
				err = l.Replace(ctx, node)
			}
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%s %s: done\n", name, node)
			return nil
		},
	}
	if withEvidence {
		cmd.Flags().StringVar(&evidence, "evidence", string(lab.EvidenceMachineDeleted),
			"what the Machine shows: machine-deleted, powered-off-condition or none")
	}
	return cmd
}

func clusterCmd(name, short string, open func() (*lab.Lab, error)) *cobra.Command {
	var mode string
	cmd := &cobra.Command{
		Use:   name + " CLUSTER",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := open()
			if err != nil {
				return err
			}
			ctx, c := cmd.Context(), args[0]
			switch name {
			case "kill-apiserver":
				err = l.KillAPIServer(c)
			case "restart-apiserver":
				err = l.RestartAPIServer(ctx, c)
			case "exhaust":
				err = l.ExhaustCapacity(ctx, c, mode)
			case "unexhaust":
				err = l.RestoreCapacity(ctx, c)
			}
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%s %s: done\n", name, c)
			return nil
		},
	}
	if name == "exhaust" {
		cmd.Flags().StringVar(&mode, "mode", lab.ExhaustCordon, "cordon (mark nodes unschedulable) or fill (one filler pod per node)")
	}
	return cmd
}
