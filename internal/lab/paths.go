package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot walks up from the working directory to the directory holding
// go.mod, so the lab finds bin/ from anywhere inside the repository.
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
			return "", fmt.Errorf("no go.mod found above the working directory; pass --bin-dir")
		}
		dir = parent
	}
}

// DefaultBinDir is <repo>/bin.
func DefaultBinDir() string {
	root, err := RepoRoot()
	if err != nil {
		return "bin"
	}
	return filepath.Join(root, "bin")
}

// RequiredBinaries are the programs `make tools` builds for the lab.
var RequiredBinaries = []string{
	CompEtcd, CompAPIServer, CompKCM, CompScheduler, CompKwok, CompKubefedCM, "kubefedctl",
}

// CheckBinaries fails, naming every missing one, when a lab binary is absent.
func CheckBinaries(binDir string) error {
	var missing []string
	for _, b := range RequiredBinaries {
		fi, err := os.Stat(filepath.Join(binDir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing lab binaries in %s: %s (run `make tools`)", binDir, strings.Join(missing, ", "))
	}
	return nil
}

// Module versions whose files (CRDs) the lab reads from the Go module cache.
const (
	KubefedModule    = "sigs.k8s.io/kubefed@v0.10.0"
	ClusterAPIModule = "sigs.k8s.io/cluster-api@v1.14.2"
)

// moduleDir returns the module cache directory of mod ("path@version"),
// downloading it through the Go module proxy if it is not cached yet.
func moduleDir(mod string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	if root, err := RepoRoot(); err == nil {
		cmd.Dir = root
	}
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	_ = json.Unmarshal(out, &info)
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", mod, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no directory reported", mod)
	}
	return info.Dir, nil
}
