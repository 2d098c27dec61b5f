// Package testenv starts a real kube-apiserver and etcd (built by `make tools`
// into bin/) through controller-runtime's envtest for API-level tests.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// RepoRoot walks up from the working directory to the directory holding go.mod.
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
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// BinDir is where `make tools` puts kube-apiserver and etcd. KUBEBUILDER_ASSETS
// wins when set, as envtest users expect.
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

// Environment returns an envtest environment for fedfailover's CRDs plus any
// extra CRD directories (relative to the repository root). A missing binary
// is an error that says how to build it: tests never skip for it.
func Environment(extraCRDDirs ...string) (*envtest.Environment, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools` first", name, bin)
		}
	}
	dirs := []string{filepath.Join(root, "config", "crd", "bases")}
	for _, d := range extraCRDDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(root, d)
		}
		dirs = append(dirs, d)
	}
	return &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     dirs,
		ErrorIfCRDPathMissing: true,
	}, nil
}

// Start starts an API server for one test and stops it when the test ends.
func Start(t testing.TB, extraCRDDirs ...string) *rest.Config {
	t.Helper()
	env, err := Environment(extraCRDDirs...)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return cfg
}

// RunMain starts one API server for a whole test package (call it from
// TestMain), runs setup and the tests, and always stops the server.
func RunMain(m *testing.M, setup func(*rest.Config) error, extraCRDDirs ...string) int {
	log.SetLogger(logr.Discard())
	env, err := Environment(extraCRDDirs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: starting envtest:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	if err := setup(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: test setup:", err)
		return 1
	}
	return m.Run()
}
