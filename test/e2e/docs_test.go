//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDocsCommands runs the kubectl commands of docs/cli.md and
// docs/install.md that no other test runs, against the lab host, as a user
// would type them (with the lab's kubeconfig).
func TestDocsCommands(t *testing.T) {
	kubectl := deployTool(t, "kubectl")
	nrHost(t) // the FailoverPolicy CRD
	env := []string{"KUBECONFIG=" + theLab.Kubeconfig()}
	run := func(args ...string) string {
		t.Helper()
		return string(runTool(t, nil, env, kubectl, append([]string{"--context", "host"}, args...)...))
	}

	t.Run("kubectl plugin list shows kubectl-failover", func(t *testing.T) {
		dir := filepath.Dir(buildCLI(t))
		// Only the plugin's directory: another kubectl-failover on PATH (bin/
		// of a checkout) would make kubectl warn that one shadows the other.
		pathEnv := append(env, "PATH="+dir)
		out := string(runTool(t, nil, pathEnv, kubectl, "plugin", "list"))
		if !strings.Contains(out, filepath.Join(dir, "kubectl-failover")) {
			t.Errorf("kubectl plugin list does not show kubectl-failover:\n%s", out)
		}
	})

	t.Run("members and policies", func(t *testing.T) {
		out := run("-n", "kube-federation-system", "get", "kubefedclusters")
		for _, m := range theLab.Members() {
			if !strings.Contains(out, m) {
				t.Errorf("kubectl get kubefedclusters does not list %s:\n%s", m, out)
			}
		}
		run("get", "failoverpolicies")
	})

	t.Run("metrics reader binding", func(t *testing.T) {
		run("create", "clusterrolebinding", "prometheus-fedfailover-metrics",
			"--clusterrole", "fedfailover-metrics-reader", "--serviceaccount", "monitoring:prometheus-k8s")
		t.Cleanup(func() {
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-fedfailover-metrics"}}
			if err := theLab.MustClient("host").Delete(context.Background(), crb); err != nil {
				t.Errorf("delete the binding: %v", err)
			}
		})
		out := run("get", "clusterrolebinding", "prometheus-fedfailover-metrics", "-o", "jsonpath={.roleRef.name} {.subjects[0].namespace}/{.subjects[0].name}")
		if out != "fedfailover-metrics-reader monitoring/prometheus-k8s" {
			t.Errorf("binding: %q", out)
		}
	})
}
