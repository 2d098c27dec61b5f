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

	"github.com/fedfailover/fedfailover/test/paths"
)

// RepoRoot and BinDir are re-exported for tests that only import testenv.
var (
	RepoRoot = paths.RepoRoot
	BinDir   = paths.BinDir
)

// Environment returns an envtest environment for fedfailover's CRDs plus any
// extra CRD files or directories (relative paths are to the repository root). A missing binary
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
