// Package members tests controllers/member against real API servers: one
// envtest host with the kubefed, Cluster API and fedfailover CRDs, and two
// envtest members joined the way `kubefedctl join` joins them.
package members

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/poll"
	"github.com/fedfailover/fedfailover/test/testenv"
)

const (
	kubefedNS     = "kube-federation-system"
	hostName      = "host"
	capiModule    = "sigs.k8s.io/cluster-api@v1.14.2"
	kubefedModule = "sigs.k8s.io/kubefed"
)

// memberEnv is one member API server. Its certificates live in a directory
// of our own, so the API server can be stopped and started again on the
// same port with the same CA and service account keys.
type memberEnv struct {
	name   string
	env    *envtest.Environment
	cfg    *rest.Config // admin
	http   *http.Client // of client, so tests can close its connections
	client client.Client
}

type federation struct {
	hostEnv *envtest.Environment
	hostCfg *rest.Config
	host    client.Client
	members map[string]*memberEnv
	tmp     string
}

var (
	fedOnce sync.Once
	fed     *federation
	fedErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	// envtest logs through controller-runtime's root logger.
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	code := m.Run()
	if fed != nil {
		fed.stop()
	}
	os.Exit(code)
}

// env starts the federation on first use; every test shares it.
func env(t *testing.T) *federation {
	t.Helper()
	fedOnce.Do(func() { fed, fedErr = startFederation() })
	if fedErr != nil {
		t.Fatalf("starting envtest federation: %v", fedErr)
	}
	return fed
}

func startFederation() (*federation, error) {
	bin, err := testenv.BinDir()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make tools` first", name, bin)
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "fedfailover-members-")
	if err != nil {
		return nil, err
	}
	crds, err := hostCRDs()
	if err != nil {
		return nil, err
	}
	f := &federation{members: map[string]*memberEnv{}, tmp: tmp}
	// The machine is shared with other builds: be patient with start-up.
	const startTimeout = 90 * time.Second
	f.hostEnv = &envtest.Environment{
		BinaryAssetsDirectory:    bin,
		ControlPlaneStartTimeout: startTimeout,
		CRDDirectoryPaths:        []string{filepath.Join(root, "config", "crd", "bases")},
		CRDs:                     crds,
		ErrorIfCRDPathMissing:    true,
	}
	names := []string{"alpha", "beta"}
	for _, n := range names {
		dir := filepath.Join(tmp, n)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		f.members[n] = &memberEnv{name: n, env: &envtest.Environment{
			BinaryAssetsDirectory:    bin,
			ControlPlaneStartTimeout: startTimeout,
			ControlPlane:             envtest.ControlPlane{APIServer: &envtest.APIServer{CertDir: dir}},
		}}
	}
	// Start the three API servers at once: each takes seconds.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Go(func() {
		cfg, err := f.hostEnv.Start()
		f.hostCfg = cfg
		errs <- err
	})
	for _, m := range f.members {
		wg.Go(func() {
			cfg, err := m.env.Start()
			m.cfg = cfg
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			f.stop()
			return nil, err
		}
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	if f.host, err = client.New(f.hostCfg, client.Options{Scheme: s}); err != nil {
		return nil, err
	}
	for _, m := range f.members {
		if m.http, err = rest.HTTPClientFor(m.cfg); err != nil {
			return nil, err
		}
		if m.client, err = client.New(m.cfg, client.Options{Scheme: clientgoscheme.Scheme, HTTPClient: m.http}); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	if err := f.host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubefedNS}}); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *federation) stop() {
	for _, m := range f.members {
		_ = m.env.Stop()
	}
	if f.hostEnv != nil {
		_ = f.hostEnv.Stop()
	}
	_ = os.RemoveAll(f.tmp)
}

// hostCRDs reads the KubeFedCluster CRD and the Cluster API Cluster and
// Machine CRDs from the module cache; nothing is copied into the repository.
func hostCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := paths.HostCRDFiles()
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		cs, err := readCRDs(f)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if c.Name == "kubefedclusters.core.kubefed.io" || c.Spec.Group == "cluster.x-k8s.io" {
				out = append(out, c)
			}
		}
	}
	if len(out) != 3 {
		return nil, fmt.Errorf("expected the KubeFedCluster, Cluster and Machine CRDs from the module cache, found %d", len(out))
	}
	return out, nil
}

func readCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(doc, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if crd.Kind == "CustomResourceDefinition" {
			out = append(out, &crd)
		}
	}
	return out, nil
}

// joined is what `kubefedctl join` leaves behind.
type joined struct {
	name   string
	token  string
	secret *corev1.Secret
	kfc    *kubefedv1beta1.KubeFedCluster
}

// join does what `kubefedctl join NAME --host-cluster-context host` does:
// a service account in the member bound to a ClusterRole with every
// permission, its token in a host Secret, and a KubeFedCluster pointing at
// the member. (kubefedctl reads the token from a legacy token Secret that
// kube-controller-manager fills; envtest has none, so we use TokenRequest.)
func (f *federation) join(t *testing.T, memberName, clusterName string, labels map[string]string) *joined {
	t.Helper()
	ctx := context.Background()
	m := f.members[memberName]
	sa := clusterName + "-" + hostName
	token := f.memberToken(t, m, sa, []rbacv1.PolicyRule{
		{APIGroups: []string{rbacv1.APIGroupAll}, Resources: []string{rbacv1.ResourceAll}, Verbs: []string{rbacv1.VerbAll}},
		{NonResourceURLs: []string{rbacv1.NonResourceAll}, Verbs: []string{"get"}},
	})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, GenerateName: clusterName + "-"},
		Data:       map[string][]byte{"token": []byte(token)},
	}
	must(t, f.host.Create(ctx, secret))
	kfc := &kubefedv1beta1.KubeFedCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, Name: clusterName, Labels: labels},
		Spec: kubefedv1beta1.KubeFedClusterSpec{
			APIEndpoint: m.cfg.Host,
			CABundle:    m.cfg.CAData,
			SecretRef:   kubefedv1beta1.LocalSecretReference{Name: secret.Name},
		},
	}
	must(t, f.host.Create(ctx, kfc))
	j := &joined{name: clusterName, token: token, secret: secret, kfc: kfc}
	t.Cleanup(func() { f.unjoin(t, j) })
	return j
}

// unjoin deletes what join created in the host, as `kubefedctl unjoin` does.
func (f *federation) unjoin(t *testing.T, j *joined) {
	ctx := context.Background()
	for _, o := range []client.Object{j.kfc, j.secret} {
		if err := f.host.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("unjoining %s: %v", j.name, err)
		}
	}
}

// memberToken creates (or reuses) a service account in the member with the
// given cluster-wide rules and returns a fresh token for it.
func (f *federation) memberToken(t *testing.T, m *memberEnv, sa string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	ensure := func(o client.Object) {
		if err := m.client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %T in %s: %v", o, m.name, err)
		}
	}
	ensure(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubefedNS}})
	ensure(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, Name: sa}})
	if rules != nil {
		role := "kubefed-controller-manager:" + sa
		ensure(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules})
		ensure(&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: kubefedNS, Name: sa}},
		})
	}
	cs, err := kubernetes.NewForConfigAndClient(m.cfg, m.http)
	must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(kubefedNS).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	must(t, err)
	tokens.add(tr.Status.Token)
	return tr.Status.Token
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every 50ms until it returns nil or the deadline
// passes, then fails with cond's last error.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	poll.T(t, timeout, 50*time.Millisecond, what, poll.NoError(cond))
}

// tokens remembers every member token a test created, for the log check.
var tokens tokenSet

type tokenSet struct {
	mu  sync.Mutex
	all []string
}

func (s *tokenSet) add(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, tok)
}

func (s *tokenSet) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.all...)
}
