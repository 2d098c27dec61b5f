// Package layout keeps the product and its test rig apart: nothing a user
// deploys (the manager and the kubectl plugin) may import the rig under test/.
package layout

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fedfailover/fedfailover/test/paths"
)

const module = "github.com/fedfailover/fedfailover"

// shipped are the binaries a user installs.
var shipped = []string{"./cmd/manager", "./cmd/kubectl-failover"}

func TestShippedBinariesDoNotImportTheRig(t *testing.T) {
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps"}, shipped...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", shipped, err)
	}
	var own int
	for _, pkg := range strings.Fields(string(out)) {
		if !strings.HasPrefix(pkg, module+"/") {
			continue
		}
		own++
		if rel := strings.TrimPrefix(pkg, module+"/"); strings.HasPrefix(rel, "test/") || rel == "test" {
			t.Errorf("%s is part of the test rig but a shipped binary depends on it", pkg)
		}
	}
	// The list must have named the project's own packages, or it proved nothing.
	if own < len(shipped) {
		t.Fatalf("go list -deps named %d of the project's packages, want at least %d:\n%s", own, len(shipped), out)
	}
}

func TestInternalDoesNotImportControllers(t *testing.T) {
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The wiring lives in controllers/; internal/ holds the pure cores and
	// shared plumbing below them and never imports back up.
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./internal/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./internal/...: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 {
		t.Fatal("go list ./internal/... named no package")
	}
	for _, line := range lines {
		f := strings.Fields(line)
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module+"/controllers") || strings.HasPrefix(imp, module+"/test/") || strings.HasPrefix(imp, module+"/cmd/") {
				t.Errorf("%s imports %s: internal/ must not import controllers/, cmd/ or the rig", f[0], imp)
			}
		}
	}
}
