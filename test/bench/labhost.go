package bench

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/paths"
)

// labHost installs the FailoverPolicy CRD in the lab host and returns the
// host's REST config and a client that knows fedfailover's types.
func labHost(l *lab.Lab) (*rest.Config, client.Client, error) {
	st, err := l.State()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Cluster(lab.HostName).Kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	root, err := paths.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(root, "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return nil, nil, fmt.Errorf("installing fedfailover CRDs in the lab host: %w", err)
	}
	s, err := scheme.New()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	return cfg, c, err
}
