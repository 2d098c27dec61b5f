package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/fedfailover/fedfailover/test/paths"
)

// krewManifest is the part of a krew Plugin manifest the test reads.
type krewManifest struct {
	Spec struct {
		Version   string `json:"version"`
		Platforms []struct {
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// testKrewRelease builds the plugin release for this platform with
// hack/release.sh, has krew validate the manifest and install the archive
// (hack/verify-krew.sh), then completes `kubectl failover` with the real
// kubectl through the installed kubectl_complete-failover, linked as the
// manifest's caveats tell users to.
func testKrewRelease(t *testing.T, h *host) {
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]string{}
	for _, name := range []string{"krew", "validate-krew-manifest", "kubectl"} {
		if tools[name], err = paths.Tool(name); err != nil {
			t.Fatal(err)
		}
	}
	out, krewRoot := t.TempDir(), filepath.Join(t.TempDir(), "krew")
	platform := runtime.GOOS + "/" + runtime.GOARCH
	// QUICK: go's default build flags, so the build reuses this test's cache.
	script(t, root, []string{"PLATFORMS=" + platform, "QUICK=1"}, "hack/release.sh", out)
	script(t, root, []string{"KREW=" + tools["krew"], "VALIDATE_KREW_MANIFEST=" + tools["validate-krew-manifest"]},
		"hack/verify-krew.sh", out, krewRoot)

	var m krewManifest
	b, err := os.ReadFile(filepath.Join(out, "failover.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Spec.Platforms) != 1 {
		t.Fatalf("manifest lists %d platforms, want 1 (%s)", len(m.Spec.Platforms), platform)
	}
	p := m.Spec.Platforms[0]
	archive, err := os.ReadFile(filepath.Join(out, filepath.Base(p.URI)))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(archive); hex.EncodeToString(sum[:]) != p.SHA256 {
		t.Errorf("manifest sha256 %s is not the archive's", p.SHA256)
	}
	wantURI := "https://github.com/fedfailover/fedfailover/releases/download/" + m.Spec.Version + "/kubectl-failover_" +
		m.Spec.Version + "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"
	if p.URI != wantURI || p.Bin != "kubectl-failover" {
		t.Errorf("platform uri %q bin %q, want %q and kubectl-failover", p.URI, p.Bin, wantURI)
	}

	// The plugin krew installed says the release's version (stamped by
	// hack/release.sh with -ldflags -X).
	ver, err := exec.Command(filepath.Join(krewRoot, "bin", "kubectl-failover"), "version").Output()
	if err != nil {
		t.Fatalf("kubectl-failover version: %v", err)
	}
	if want := "kubectl-failover " + m.Spec.Version + " (revision "; !strings.HasPrefix(string(ver), want) {
		t.Errorf("installed plugin prints %q, want it to start with %q", ver, want)
	}

	helper := filepath.Join(krewRoot, "store", "failover", m.Spec.Version, "kubectl_complete-failover")
	if err := os.Symlink(helper, filepath.Join(krewRoot, "bin", "kubectl_complete-failover")); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + filepath.Join(krewRoot, "bin") + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "KUBECONFIG=" + h.admin}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"pl"}, []string{"plan"}},
		{[]string{"plan", "--fail", ""}, []string{"member1", "member2"}},
		{[]string{"explain", "node", "member1/m1-node-"}, []string{"member1/m1-node-1", "member1/m1-node-2", "member1/m1-node-3"}},
	} {
		args := append([]string{"__complete", "failover", "--kubeconfig=" + h.admin}, c.args...)
		cmd := exec.Command(tools["kubectl"], args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
		}
		if got, _ := parseCompletion(t, string(out)); !slices.Equal(got, c.want) {
			t.Errorf("kubectl %s completes %q, want %q", strings.Join(args, " "), got, c.want)
		}
	}
}

// script runs one of the repository's scripts with extra environment.
func script(t *testing.T, root string, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(root, name), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}
