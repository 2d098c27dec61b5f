//go:build e2e

// The lab tests run real manager processes with --shard against a lab of
// four members with audit logs on. Run with (root: one replica runs in a
// network namespace):
//
//	go test -tags e2e -timeout 30m -v ./test/sharding/
package sharding

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/managerproc"
	"github.com/fedfailover/fedfailover/test/paths"
)

// The lab of this package: members one more than the replicas, two nodes
// each (one to power off, one for the replacement).
const (
	labMembers = 4
	labNodes   = 2
)

var (
	theLab     *lab.Lab
	managerBin string
)

func TestMain(m *testing.M) {
	os.Exit(lab.RunTestMain(m, lab.MainOptions{
		Name: "sharding", NeedRoot: true, KeepDirOnFailure: true,
		Lab: lab.Options{Members: labMembers, Nodes: labNodes, AuditLog: true},
		Setup: func(l *lab.Lab, dir string) error {
			theLab = l
			root, err := paths.RepoRoot()
			if err != nil {
				return err
			}
			if managerBin, err = managerproc.Build(root, dir); err != nil {
				return err
			}
			return installCRDs(root)
		},
		OnFailure: func(_ *lab.Lab, dir string) { keepAuditLogs(filepath.Join(dir, "audit")) },
	}))
}

// installCRDs installs fedfailover's CRDs in the lab host.
func installCRDs(root string) error {
	st, err := theLab.State()
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Cluster(lab.HostName).Kubeconfig)
	if err != nil {
		return err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing fedfailover's CRDs in the lab host: %w", err)
	}
	return nil
}

// keepAuditLogs copies every cluster's audit log into dir before the lab
// (and its directory) goes.
func keepAuditLogs(dir string) {
	st, err := theLab.State()
	if err != nil {
		fmt.Fprintln(os.Stderr, "keeping the audit logs:", err)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "keeping the audit logs:", err)
		return
	}
	for _, c := range st.Clusters {
		b, err := os.ReadFile(lab.AuditLogPath(c))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, c.Name+".log"), b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "keeping the audit log of", c.Name+":", err)
		}
	}
}
