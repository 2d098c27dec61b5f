//go:build e2e

// The lab tests run real manager processes with --shard against a lab of
// four members with audit logs on. Run with (root: one replica runs in a
// network namespace):
//
//	go test -tags e2e -timeout 20m -v ./test/sharding/
package sharding

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

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
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	binDir := os.Getenv("LAB_BIN_DIR")
	if binDir == "" {
		binDir = lab.DefaultBinDir()
	}
	// Fail loudly, never skip, when the lab binaries are missing.
	if err := lab.CheckBinaries(binDir); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the sharding lab tests need the lab binaries:", err)
		return 1
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "FAIL: the sharding lab tests need root (a replica runs in a network namespace)")
		return 1
	}
	root, err := paths.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "fedfailover-sharding-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if managerBin, err = managerproc.Build(root, dir); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	start := time.Now()
	l, err := lab.Up(context.Background(), lab.Options{
		Dir: filepath.Join(dir, "lab"), BinDir: binDir, Members: labMembers, Nodes: labNodes, AuditLog: true,
		Logf: func(f string, a ...any) {
			fmt.Printf("%s "+f+"\n", append([]any{time.Now().Format("15:04:05")}, a...)...)
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: lab did not start:", err)
		return 1
	}
	theLab = l
	fmt.Printf("lab of %d members x %d nodes ready in %.1fs\n", labMembers, labNodes, time.Since(start).Seconds())
	// Tear down on interrupt too: the lab must not outlive the test binary.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "interrupted: tearing the lab down")
		_ = l.Down(context.Background())
		os.Exit(2)
	}()
	code := 1
	if err := installCRDs(root); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
	} else {
		code = m.Run()
	}
	if code != 0 {
		fmt.Println("--- lab diagnosis after a failure ---")
		l.Diagnose(os.Stdout, 40)
		keepAuditLogs(filepath.Join(dir, "audit"))
	}
	if err := l.Down(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "lab teardown:", err)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Println("audit and manager logs kept in", dir)
	}
	return code
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
