package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/testenv"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// poll calls f until it returns nil or the deadline passes.
func poll(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not true within %s: %v", what, timeout, err)
}

// TestManagerServes runs the real manager against a real API server and checks
// what an operator of it relies on: probes answer, metrics are served with
// the certificate of --metrics-cert-dir (verified with its CA, as the chart's
// ServiceMonitor does) and refuse anonymous callers, leader election takes
// its Lease and, sharded (as the chart runs several replicas with
// sharding.enabled), the replica announces itself with a peer Lease under
// the RBAC of config/sharding.
func TestManagerServes(t *testing.T) {
	// The manager reads KubeFedClusters and Machines, so the host needs their CRDs.
	crds, err := paths.HostCRDFiles()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testenv.Start(t, crds...)
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	const ns = "fedfailover-system"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-federation-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The manager runs as its ServiceAccount with only the RBAC of
	// config/rbac, so a missing rule fails this test.
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	applyDir(t, cfg, root, "config/rbac")
	applyDir(t, cfg, root, "config/sharding")
	asManager := rest.CopyConfig(cfg)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":fedfailover-controller-manager"}
	const metricsHost = "fedfailover-metrics." + ns + ".svc"
	certDir := t.TempDir()
	caPool := writeServingCert(t, certDir, metricsHost)
	o, err := parseFlags([]string{
		"--metrics-bind-address", freeAddr(t), "--metrics-cert-dir", certDir,
		"--health-probe-bind-address", freeAddr(t),
		"--leader-elect", "--leader-election-namespace", ns, "--shard",
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, asManager, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("manager exited with error: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("manager did not stop within 30s")
		}
	})

	poll(t, 30*time.Second, "readyz answers 200", func() error {
		return expectStatus(http.DefaultClient, "http://"+o.probeAddr+"/readyz", http.StatusOK)
	})
	verifying := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool, ServerName: metricsHost}}}
	poll(t, 30*time.Second, "metrics served with the given certificate refuse anonymous callers", func() error {
		return expectStatus(verifying, "https://"+o.metricsAddr+"/metrics", http.StatusUnauthorized)
	})
	if err := expectStatus(http.DefaultClient, "http://"+o.metricsAddr+"/metrics", http.StatusOK); err == nil {
		t.Error("metrics are served over plain HTTP")
	}
	poll(t, 30*time.Second, "leader election Lease held", func() error {
		lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, "fedfailover.failover.fedfailover.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return errors.New("lease has no holder")
		}
		return nil
	})
	poll(t, 30*time.Second, "peer Lease written", func() error {
		leases, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelShardPeer + "=true"})
		if err != nil {
			return err
		}
		if len(leases.Items) != 1 {
			return fmt.Errorf("%d peer Leases, want 1", len(leases.Items))
		}
		return nil
	})
	// Its caches synced and it may write policy status: the sample policy
	// gets a status for its generation.
	applyFile(t, cfg, filepath.Join(root, "config/samples/failover_v1alpha1_failoverpolicy_full.yaml"))
	admin, err := client.New(cfg, client.Options{Scheme: mustScheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	poll(t, 60*time.Second, "sample policy status written by the manager", func() error {
		var list v1alpha1.FailoverPolicyList
		if err := admin.List(ctx, &list); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d policies, want 1", len(list.Items))
		}
		p := list.Items[0]
		if p.Status.ObservedGeneration != p.Generation {
			return fmt.Errorf("status observedGeneration %d, generation %d", p.Status.ObservedGeneration, p.Generation)
		}
		return nil
	})
}

func mustScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// applyDir creates every object of the YAML files in dir (relative to root)
// except kustomization.yaml.
func applyDir(t *testing.T, cfg *rest.Config, root, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			applyFile(t, cfg, f)
		}
	}
}

// applyFile creates every object of a multi-document YAML file, creating
// missing namespaces first.
func applyFile(t *testing.T, cfg *rest.Config, file string) {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatalf("%s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if ns := u.GetNamespace(); ns != "" {
			err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		if err := c.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
	}
}

func expectStatus(c *http.Client, url string, want int) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s: status %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}

func TestParseFlagsRejectsUnknown(t *testing.T) {
	if _, err := parseFlags([]string{"--no-such-flag"}); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

func TestShardFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		leNS   string
		wantNS string
	}{
		{"off by default", nil, "ns-le", ""},
		{"--shard takes the leader election namespace", []string{"--shard"}, "ns-le", "ns-le"},
		{"a namespace turns it on", []string{"--shard-lease-namespace", "ns-shard"}, "ns-le", "ns-shard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			so, err := o.shard.options(tc.leNS)
			if err != nil {
				t.Fatal(err)
			}
			if so.Namespace != tc.wantNS {
				t.Errorf("shard namespace %q, want %q", so.Namespace, tc.wantNS)
			}
		})
	}
	o, err := parseFlags([]string{"--shard", "--shard-lease-namespace", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), &rest.Config{Host: "https://127.0.0.1:1"}, o); err == nil ||
		!strings.Contains(err.Error(), "--leader-elect") {
		t.Errorf("--shard without --leader-elect: %v, want an error naming --leader-elect", err)
	}
}

// --member-write-timeout must leave no write in flight once another
// replica may take a member over: a value not shorter than the Lease
// gap is refused with an error naming the flags; a valid one is wired.
func TestMemberWriteTimeoutFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" accepted
	}{
		{[]string{"--member-write-timeout=5s"}, "--leader-elect-renew-deadline"},
		{[]string{"--member-write-timeout=4s"}, ""},
		// The leader election's own timings set the bound when unsharded.
		{[]string{"--leader-elect-lease-duration=20s", "--member-write-timeout=5s"}, ""},
		{[]string{"--leader-elect-renew-deadline=12s", "--member-write-timeout=3s"}, "--leader-elect-lease-duration"},
		{[]string{"--shard-lease-namespace=x", "--member-write-timeout=5s"}, "--shard-lease-duration"},
		{[]string{"--shard-lease-namespace=x", "--shard-lease-duration=20s", "--member-write-timeout=5s"}, ""},
		{[]string{"--shard-lease-namespace=x", "--shard-renew-deadline=12s", "--member-write-timeout=3s"}, "--shard-renew-deadline"},
		{[]string{"--member-write-timeout=-1s"}, "--member-write-timeout"},
	} {
		o, err := parseFlags(tc.args)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v refused: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--member-write-timeout")):
			t.Errorf("%v: %v, want an error naming --member-write-timeout and %s", tc.args, err, tc.want)
		case tc.want == "" && operatorOptions(o).Members.WriteTimeout != o.memberWriteTO:
			t.Errorf("%v: member write timeout %s not wired", tc.args, operatorOptions(o).Members.WriteTimeout)
		}
	}
}
