//go:build e2e

package lab

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/paths"
)

// TestLabCLIAsDocumented runs the fedfailover-lab commands of README.md and
// docs/lab.md: up --detach, status, poweroff, down.
func TestLabCLIAsDocumented(t *testing.T) {
	if err := lab.CheckBinaries(lab.DefaultBinDir()); err != nil {
		t.Fatalf("lab binaries missing (run `make tools`): %v", err)
	}
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fedfailover-lab")
	build := exec.Command("go", "build", "-o", bin, "./cmd/fedfailover-lab")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building fedfailover-lab: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "lab")
	run := func(timeout time.Duration, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--dir", dir)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fedfailover-lab %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(4*time.Minute, "up", "--members", "1", "--nodes", "2", "--detach")
	t.Cleanup(func() {
		// A failed step must not leave the detached lab running.
		cmd := exec.Command(bin, "down", "--dir", dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("fedfailover-lab down: %v\n%s", err, out)
		}
	})

	status := run(time.Minute, "status")
	for _, want := range []string{"host", "member1", "member1/kwok/member1-node-2", "running"} {
		if !strings.Contains(status, want) {
			t.Errorf("status does not show %q:\n%s", want, status)
		}
	}
	run(time.Minute, "poweroff", "member1-node-2", "--evidence", "machine-deleted")
	l, err := lab.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeAlive("member1", "member1-node-2") {
		t.Error("member1-node-2 still alive after poweroff")
	}
	if !st.NodeAlive("member1", "member1-node-1") {
		t.Error("member1-node-1 went down with member1-node-2: nodes must fail independently")
	}
	m, err := l.Machine(context.Background(), "member1-node-2")
	if err != nil {
		t.Fatal(err)
	}
	if m.DeletionTimestamp == nil {
		t.Error("machine-deleted evidence: the Machine of member1-node-2 is not being deleted")
	}
	run(2*time.Minute, "down")
	if _, err := lab.Open(dir); err == nil {
		t.Error("the lab directory still holds a lab after down")
	}
}
