package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fedfailover/fedfailover/test/paths"
)

// RepoRoot is the repository root (the lab finds bin/ from anywhere in it).
var RepoRoot = paths.RepoRoot

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
