package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPluginDependencies keeps the plugin a reader of the host: it must not
// link a controller, a manager, or the operator's metrics (whose init
// registers collectors).
func TestPluginDependencies(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps printed %d packages: not a dependency list", len(deps))
	}
	for _, pkg := range deps {
		switch {
		case strings.HasPrefix(pkg, "github.com/fedfailover/fedfailover/controllers/"),
			pkg == "sigs.k8s.io/controller-runtime/pkg/manager",
			pkg == "github.com/fedfailover/fedfailover/internal/metrics":
			t.Errorf("kubectl-failover depends on %s", pkg)
		}
	}
}
