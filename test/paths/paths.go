// Package paths finds what fedfailover's tests, lab and tools read from
// outside the Go code: the repository root, the bin/ directory `make tools`
// fills, and upstream CRD manifests inside the Go module cache (never copied
// into this repository).
package paths

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Upstream module versions whose CRD manifests are installed on the host.
const (
	KubefedModule    = "sigs.k8s.io/kubefed@v0.10.0"
	ClusterAPIModule = "sigs.k8s.io/cluster-api@v1.14.2"
)

// Files inside those modules.
var (
	KubefedCRDFile = "charts/kubefed/charts/controllermanager/crds/crds.yaml"
	CAPICRDFiles   = []string{
		"core/config/crd/bases/cluster.x-k8s.io_clusters.yaml",
		"core/config/crd/bases/cluster.x-k8s.io_machines.yaml",
	}
)

// RepoRoot walks up from the working directory to the directory with go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod found above the working directory")
		}
		dir = parent
	}
}

// BinDir is where `make tools` puts binaries: KUBEBUILDER_ASSETS when set (as
// envtest users expect), else <repo>/bin.
func BinDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// Tool returns the path of a binary `make tools` builds into BinDir, or an
// error that says how to build it: tests that need a tool never skip.
func Tool(name string) (string, error) {
	bin, err := BinDir()
	if err != nil {
		return "", err
	}
	path := filepath.Join(bin, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s not found in %s: run `make tools` first", name, bin)
	}
	return path, nil
}

// ModuleDir returns the module cache directory of mod ("path@version"),
// downloading it through the Go module proxy when it is not cached yet.
func ModuleDir(mod string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	if root, err := RepoRoot(); err == nil {
		cmd.Dir = root
	}
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	_ = json.Unmarshal(out, &info)
	switch {
	case info.Error != "":
		return "", fmt.Errorf("go mod download %s: %s", mod, info.Error)
	case err != nil:
		return "", fmt.Errorf("go mod download %s: %w", mod, err)
	case info.Dir == "":
		return "", fmt.Errorf("go mod download %s: no directory reported", mod)
	}
	return info.Dir, nil
}

// HostCRDFiles returns the kubefed CRD manifest and the Cluster API Cluster
// and Machine CRD manifests from the module cache.
func HostCRDFiles() ([]string, error) {
	kubefed, err := ModuleDir(KubefedModule)
	if err != nil {
		return nil, err
	}
	capi, err := ModuleDir(ClusterAPIModule)
	if err != nil {
		return nil, err
	}
	files := []string{filepath.Join(kubefed, KubefedCRDFile)}
	for _, f := range CAPICRDFiles {
		files = append(files, filepath.Join(capi, f))
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("upstream CRD manifest missing: %w", err)
		}
	}
	return files, nil
}

// FenceAgentCRDDir is the directory of the lab fence agent's CRDs
// (lab.fedfailover.io LabRemediation and LabRemediationTemplate).
func FenceAgentCRDDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "test", "lab", "fenceagent", "crds"), nil
}
