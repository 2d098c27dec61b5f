package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fedfailover/fedfailover/test/paths"
)

func (l *Lab) setupHost(ctx context.Context, st *State) error {
	host := st.Clusters[0]
	cl, err := l.Client(host.Name)
	if err != nil {
		return err
	}
	files, err := paths.HostCRDFiles()
	if err != nil {
		return err
	}
	// The lab's own fence agent API (test/lab/fenceagent).
	fence, err := paths.FenceAgentCRDDir()
	if err != nil {
		return err
	}
	files = append(files, filepath.Join(fence, "lab.fedfailover.io_crds.yaml"))
	if err := installCRDs(ctx, cl, files...); err != nil {
		return fmt.Errorf("host CRDs: %w", err)
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KubefedNS}}); err != nil {
		return err
	}
	if l.opts.MachineNamespace != "default" {
		if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.opts.MachineNamespace}}); err != nil {
			return err
		}
	}
	timings, err := kubefedTimingsFor(l.opts.KubefedTimings)
	if err != nil {
		return err
	}
	if err := createIgnoreExists(ctx, cl, kubeFedConfig(timings)); err != nil {
		return fmt.Errorf("KubeFedConfig: %w", err)
	}
	// Before kubefed starts: a type enabled under a running kubefed v0.10
	// got two sync controllers, and the first one's worker, whose informer
	// never syncs, exits the whole process after cacheSyncTimeout (2 min
	// into every lab, in the middle of a test or a kubefed-alone baseline).
	for _, t := range []string{"namespaces", "deployments.apps"} {
		if _, err := l.Kubefedctl(ctx, "enable", t); err != nil {
			return err
		}
	}
	ports := NewPortAllocator()
	healthz, err := ports.Free()
	if err != nil {
		return err
	}
	metrics, err := ports.Free()
	if err != nil {
		return err
	}
	p := &Proc{
		Component: CompKubefedCM, Cluster: host.Name, Binary: l.bin(CompKubefedCM), Port: healthz,
		Log: filepath.Join(host.Dir, "logs", "kubefed-controller-manager.log"),
		Args: []string{
			"--kubeconfig=" + host.Kubeconfig,
			"--kubefed-namespace=" + KubefedNS,
			fmt.Sprintf("--healthz-addr=127.0.0.1:%d", healthz),
			fmt.Sprintf("--metrics-addr=127.0.0.1:%d", metrics),
			"--v=2",
		},
	}
	return l.launch(ctx, p, func(ctx context.Context) error {
		return httpGetOK(ctx, insecureClient, fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz), "")
	})
}

// Kubefed timing sets for the lab (Options.KubefedTimings).
const (
	// KubefedTimingsDefault is the kubefed chart's defaults (and kubefed's
	// own, pkg/apis/core/v1beta1/defaults): what a user's kubefed does.
	// Baselines and benchmarks run with it.
	KubefedTimingsDefault = "default"
	// KubefedTimingsTuned is faster for local iteration: kubefed sees a
	// member fail in 5-10 s and replans 10 s later. Not what users run.
	KubefedTimingsTuned = "tuned"
	// KubefedTimingsEnv selects the timings when Options leave them empty.
	KubefedTimingsEnv = "FEDFAILOVER_LAB_KUBEFED_TIMINGS"
)

// kubefedTimings are the KubeFedConfig fields that decide how fast kubefed
// notices a member failing and reacts to it.
type kubefedTimings struct {
	healthPeriod, healthTimeout      string
	failureThreshold                 int64
	successThreshold                 int64
	availableDelay, unavailableDelay string
}

func kubefedTimingsFor(name string) (kubefedTimings, error) {
	switch name {
	case KubefedTimingsDefault:
		// kubefed v0.10 charts/kubefed/charts/controllermanager/templates/kubefedconfig.yaml
		return kubefedTimings{healthPeriod: "10s", healthTimeout: "3s", failureThreshold: 3, successThreshold: 1,
			availableDelay: "20s", unavailableDelay: "60s"}, nil
	case KubefedTimingsTuned:
		return kubefedTimings{healthPeriod: "5s", healthTimeout: "3s", failureThreshold: 2, successThreshold: 1,
			availableDelay: "5s", unavailableDelay: "10s"}, nil
	}
	return kubefedTimings{}, fmt.Errorf("kubefed timings %q: want %q or %q", name, KubefedTimingsDefault, KubefedTimingsTuned)
}

// kubeFedConfig mirrors the kubefed chart's KubeFedConfig with the given
// health check and delays. The leader lock must be configmaps or endpoints:
// kubefed v0.10 knows no leases.
func kubeFedConfig(t kubefedTimings) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.kubefed.io/v1beta1",
		"kind":       "KubeFedConfig",
		"metadata":   map[string]any{"name": "kubefed", "namespace": KubefedNS},
		"spec": map[string]any{
			"scope": "Cluster",
			"controllerDuration": map[string]any{
				"availableDelay": t.availableDelay, "unavailableDelay": t.unavailableDelay, "cacheSyncTimeout": "2m",
			},
			"leaderElect": map[string]any{
				// A single replica has no one to fail over to: a long renew
				// deadline keeps a slow API server from making it lose the lock
				// and exit; the lease stays short enough that a restarted
				// kubefed takes over within 30 s.
				"leaseDuration": "30s", "renewDeadline": "25s", "retryPeriod": "5s", "resourceLock": "configmaps",
			},
			"clusterHealthCheck": map[string]any{
				"period": t.healthPeriod, "failureThreshold": t.failureThreshold,
				"successThreshold": t.successThreshold, "timeout": t.healthTimeout,
			},
			"syncController":   map[string]any{"maxConcurrentReconciles": int64(2), "adoptResources": "Enabled"},
			"statusController": map[string]any{"maxConcurrentReconciles": int64(2)},
			"featureGates": []any{
				map[string]any{"name": "PushReconciler", "configuration": "Enabled"},
				map[string]any{"name": "SchedulerPreferences", "configuration": "Enabled"},
			},
		},
	}}
	return u
}

// installCRDs creates every CRD found in the YAML files and waits until the
// API server serves them.
func installCRDs(ctx context.Context, cl client.Client, files ...string) error {
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if crd.Name == "" {
				continue
			}
			if err := createIgnoreExists(ctx, cl, crd); err != nil {
				return fmt.Errorf("create CRD %s: %w", crd.Name, err)
			}
			names = append(names, crd.Name)
		}
	}
	return pollUntil(ctx, 60*time.Second, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false, err
			}
			established := false
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				return false, fmt.Errorf("CRD %s not established", n)
			}
		}
		return true, nil
	})
}

// Kubefedctl runs the real kubefedctl against the lab's merged kubeconfig.
func (l *Lab) Kubefedctl(ctx context.Context, args ...string) (string, error) {
	args = append(args, "--kubeconfig="+l.Kubeconfig(), "--host-cluster-context="+HostName, "--kubefed-namespace="+KubefedNS)
	cmd := exec.CommandContext(ctx, l.bin("kubefedctl"), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("kubefedctl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// joinMembers runs `kubefedctl join` for every member and waits until
// kubefed reports every member Ready (setupHost enabled the federated types).
func (l *Lab) joinMembers(ctx context.Context, st *State) error {
	errs := make([]error, len(st.Clusters))
	var wg sync.WaitGroup
	for i, c := range st.Clusters[1:] {
		wg.Go(func() {
			_, errs[i] = l.Kubefedctl(ctx, "join", c.Name, "--cluster-context="+c.Name, "--v=2")
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	host, err := l.Client(HostName)
	if err != nil {
		return err
	}
	for _, c := range st.Clusters[1:] {
		if err := waitKubeFedClusterReady(ctx, host, c.Name, 60*time.Second); err != nil {
			return err
		}
	}
	l.logf("lab: members joined (%s)", time.Since(st.StartedAt).Round(100*time.Millisecond))
	return nil
}

func waitKubeFedClusterReady(ctx context.Context, host client.Client, name string, timeout time.Duration) error {
	err := pollUntil(ctx, timeout, 500*time.Millisecond, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("core.kubefed.io/v1beta1")
		u.SetKind("KubeFedCluster")
		if err := host.Get(ctx, client.ObjectKey{Namespace: KubefedNS, Name: name}, u); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, fmt.Errorf("KubeFedCluster %s not Ready yet", name)
	})
	if err != nil {
		return fmt.Errorf("kubefed member %s: %w", name, err)
	}
	return nil
}

// ApplyYAML creates (or replaces) the objects in a multi-document YAML on cluster.
func (l *Lab) ApplyYAML(ctx context.Context, cluster string, doc string) error {
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	for _, part := range strings.Split(doc, "\n---") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(part), &u.Object); err != nil {
			return err
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := cl.Create(ctx, u); err != nil {
			return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}
