//go:build e2e

package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/paths"
)

// buildCLI builds kubectl-failover into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-failover")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/kubectl-failover")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-failover: %v\n%s", err, out)
	}
	return bin
}

// cli runs the CLI against the lab host and returns its combined output.
func cli(ctx context.Context, bin string, args ...string) (string, error) {
	args = append(args, "--kubeconfig", theLab.Kubeconfig(), "--context", lab.HostName)
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// TestCLIOnLab: with the rebalance controller managing a federated
// workload, `kubectl failover` shows the members and the RSP, previews a
// member failure, explains a node from its Machine, and keeps working while
// a member's API server is down (it reads only the host).
func TestCLIOnLab(t *testing.T) {
	bin := buildCLI(t)
	startRebalance(t)
	const ns = "cli-e2e"
	rbPolicy(t, "cli", ns, nil)
	nrPolicy(t, "cli-recovery", nil) // explain needs a policy that recovers member1's nodes
	federatedWorkload(t, ns, "web", 4)
	eventually(t, 90*time.Second, "status shows both members connected and the RSP", func(ctx context.Context) (bool, string) {
		out, err := cli(ctx, bin, "status")
		ok := err == nil && hasRow(out, "cli", "Rebalance", "No", "2/2") && strings.Contains(out, ns+"/web")
		return ok, out
	})
	out, err := cli(t.Context(), bin, "plan", "--fail", "member2")
	if err != nil || !hasRow(out, ns+"/web", "member2", "Failed") {
		t.Fatalf("plan --fail member2: %v\n%s", err, out)
	}
	t.Log(out)
	node := firstNode(t, "member1")
	out, err = cli(t.Context(), bin, "explain", "node", "member1/"+node)
	if err != nil || !strings.Contains(out, "Policy:           cli-recovery") || !strings.Contains(out, "Machine:") {
		t.Fatalf("explain node: %v\n%s", err, out)
	}
	if err := theLab.KillAPIServer("member2"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := theLab.RestartAPIServer(context.Background(), "member2"); err != nil {
			t.Errorf("restarting member2: %v", err)
		}
	})
	eventually(t, 60*time.Second, "status shows member2 disconnected", func(ctx context.Context) (bool, string) {
		out, err := cli(ctx, bin, "status")
		return err == nil && hasRow(out, "member2", "No"), out
	})
}

func firstNode(t *testing.T, cluster string) string {
	t.Helper()
	st, err := theLab.State()
	if err != nil {
		t.Fatal(err)
	}
	c := st.Cluster(cluster)
	if c == nil || len(c.Nodes) == 0 {
		t.Fatalf("lab has no nodes in %s", cluster)
	}
	return c.Nodes[0].Name
}

// hasRow reports whether a table line starts with these cells.
func hasRow(out string, cells ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(cells) && slices.Equal(f[:len(cells)], cells) {
			return true
		}
	}
	return false
}
