//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// The chart is rendered as `helm install fedfailover charts/fedfailover -n
// fedfailover-system`, which must match config/default resource for resource.
const (
	deployRelease   = "fedfailover"
	deployNamespace = "fedfailover-system"
	kubefedNS       = "kube-federation-system"
	managerName     = "fedfailover-controller-manager"
	managerRole     = "fedfailover-manager"
	// kubeVersion is what `helm template` renders for (the lab's version).
	kubeVersion = "v1.37.2"
)

// TestDeployManifests renders the Helm chart and config/default, checks what
// they contain (least-privilege RBAC identical to the controller-gen output,
// restricted pod security, two leader-electing replicas) and applies both with
// `kubectl apply --dry-run=server` to the lab's host API server.
func TestDeployManifests(t *testing.T) {
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm, kubectl := deployTool(t, "helm"), deployTool(t, "kubectl")
	helmEnv := []string{
		"HELM_CACHE_HOME=" + t.TempDir(), "HELM_CONFIG_HOME=" + t.TempDir(), "HELM_DATA_HOME=" + t.TempDir(),
	}
	chartDir := filepath.Join(root, "charts", "fedfailover")

	chartOut := runTool(t, nil, helmEnv, helm, "template", deployRelease, chartDir,
		"--namespace", deployNamespace, "--kube-version", kubeVersion, "--include-crds")
	kustOut := runTool(t, nil, nil, kubectl, "kustomize", filepath.Join(root, "config", "default"))
	chart, kust := decodeObjects(t, chartOut), decodeObjects(t, kustOut)

	generated := decodeObjects(t, readFile(t, filepath.Join(root, "config", "rbac", "role.yaml")))
	crdFiles, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crdFiles) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range crdFiles {
		crds = append(crds, decodeObjects(t, readFile(t, f))...)
	}

	for _, r := range []struct {
		name string
		objs []*unstructured.Unstructured
	}{{"helm template", chart}, {"kubectl kustomize config/default", kust}} {
		t.Run("rendered/"+r.name, func(t *testing.T) {
			assertRBACMatchesGenerated(t, r.objs, generated)
			assertCRDsMatchGenerated(t, r.objs, crds)
			assertNoWildcards(t, r.objs)
			assertMetricsRBAC(t, r.objs)
			assertManagerDeployment(t, r.objs)
			assertMetricsService(t, r.objs)
		})
	}

	t.Run("chart and kustomize create the same objects", func(t *testing.T) {
		skip := map[string]bool{"Namespace": true} // helm installs into an existing (or --create-namespace) one
		a, b := objectKeys(chart, skip), objectKeys(kust, skip)
		if !slices.Equal(a, b) {
			t.Errorf("objects differ:\n helm:      %v\n kustomize: %v", a, b)
		}
	})

	t.Run("chart options", func(t *testing.T) {
		if hasKind(chart, "ServiceMonitor") {
			t.Error("ServiceMonitor rendered although metrics.serviceMonitor.enabled defaults to false")
		}
		sm := decodeObjects(t, runTool(t, nil, helmEnv, helm, "template", deployRelease, chartDir,
			"--namespace", deployNamespace, "--kube-version", kubeVersion, "--set", "metrics.serviceMonitor.enabled=true"))
		if !hasKind(sm, "ServiceMonitor") {
			t.Error("no ServiceMonitor with metrics.serviceMonitor.enabled=true")
		}
		// The schema keeps the pod security settings restricted.
		cmd := exec.Command(helm, "template", deployRelease, chartDir, "--kube-version", kubeVersion, "--set", "securityContext.allowPrivilegeEscalation=true")
		cmd.Env = append(os.Environ(), helmEnv...)
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "schema") {
			t.Errorf("values.schema.json accepted allowPrivilegeEscalation=true: err=%v\n%s", err, out)
		}
	})

	t.Run("dry-run=server on the lab host", func(t *testing.T) {
		ctx := t.Context()
		host := theLab.MustClient("host")
		createRestrictedNamespace(t, host)
		for _, r := range []struct {
			name     string
			manifest []byte
		}{{"helm template", chartOut}, {"kubectl kustomize config/default", kustOut}} {
			out, stderr := runToolStderr(t, r.manifest, nil, kubectl, "--kubeconfig", theLab.Kubeconfig(), "--context", "host",
				"apply", "--dry-run=server", "-f", "-")
			t.Logf("%s | kubectl apply --dry-run=server:\n%s", r.name, out)
			if strings.Contains(stderr, "PodSecurity") {
				t.Errorf("%s: Pod Security warnings: %s", r.name, stderr)
			}
			if !strings.Contains(string(out), "deployment.apps/"+managerName) {
				t.Errorf("%s: the manager Deployment was not applied", r.name)
			}
		}
		// Pod Security admission only warns for Deployments; a dry-run Pod
		// from the template is enforced against "restricted".
		for _, objs := range [][]*unstructured.Unstructured{chart, kust} {
			d := managerDeployment(t, objs)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "fedfailover-psa-", Namespace: deployNamespace, Labels: d.Spec.Template.Labels},
				Spec:       d.Spec.Template.Spec,
			}
			if err := host.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Errorf("the manager pod is rejected in a restricted namespace: %v", err)
			}
		}
	})
}

// TestDeployCommandsOfTheDocs runs the install commands of docs/install.md
// against the lab host, checks what they created and removes it again. The
// CRDs stay: other tests use them, and both paths leave existing CRDs alone.
func TestDeployCommandsOfTheDocs(t *testing.T) {
	root, err := lab.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	helm, kubectl := deployTool(t, "helm"), deployTool(t, "kubectl")
	helmEnv := []string{
		"HELM_CACHE_HOME=" + t.TempDir(), "HELM_CONFIG_HOME=" + t.TempDir(), "HELM_DATA_HOME=" + t.TempDir(),
	}
	nrHost(t) // the FailoverPolicy CRD, as a cluster that had fedfailover before
	host := theLab.MustClient("host")
	kc := []string{"--kubeconfig", theLab.Kubeconfig()}
	const image = "registry.example.com/fedfailover:0.1.0"
	// A fresh cluster: no install namespace yet, and none left behind.
	deleteNamespaceAndWait(t, host, deployNamespace)
	t.Cleanup(func() { deleteNamespaceAndWait(t, host, deployNamespace) })

	t.Run("helm install", func(t *testing.T) {
		runTool(t, nil, helmEnv, helm, append([]string{"install", deployRelease, filepath.Join(root, "charts", "fedfailover"),
			"--namespace", deployNamespace, "--create-namespace",
			"--set", "image.repository=registry.example.com/fedfailover", "--set", "image.tag=0.1.0",
			"--kube-context", "host"}, kc...)...)
		runTool(t, nil, nil, kubectl, append(kc, "--context", "host", "label", "namespace", deployNamespace,
			"pod-security.kubernetes.io/enforce=restricted", "--overwrite")...)
		assertInstalled(t, host, image)
		runTool(t, nil, helmEnv, helm, append([]string{"uninstall", deployRelease, "--namespace", deployNamespace, "--kube-context", "host", "--wait"}, kc...)...)
		assertRemoved(t, host)
	})

	t.Run("kubectl apply -k", func(t *testing.T) {
		runTool(t, nil, nil, kubectl, append(kc, "--context", "host", "apply", "-k", filepath.Join(root, "config", "default"))...)
		runTool(t, nil, nil, kubectl, append(kc, "--context", "host", "-n", deployNamespace, "set", "image",
			"deployment/"+managerName, "manager="+image)...)
		assertInstalled(t, host, image)
		// Everything but the CRDs, which the other tests still use.
		objs := decodeObjects(t, runTool(t, nil, nil, kubectl, "kustomize", filepath.Join(root, "config", "default")))
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
				continue
			}
			if err := host.Delete(t.Context(), o); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
		assertRemoved(t, host)
	})
}

// assertInstalled checks the objects an install must create, with the
// manager's image, Role scopes and restricted namespace.
func assertInstalled(t *testing.T, host client.Client, image string) {
	t.Helper()
	ctx := t.Context()
	d := &appsv1.Deployment{}
	if err := host.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: managerName}, d); err != nil {
		t.Fatalf("manager Deployment: %v", err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		t.Errorf("manager image %q, want %q", got, image)
	}
	for _, key := range []client.ObjectKey{
		{Namespace: kubefedNS, Name: managerRole},
		{Namespace: deployNamespace, Name: "fedfailover-leader-election"},
	} {
		if err := host.Get(ctx, key, &rbacv1.Role{}); err != nil {
			t.Errorf("Role %s: %v", key, err)
		}
		if err := host.Get(ctx, key, &rbacv1.RoleBinding{}); err != nil {
			t.Errorf("RoleBinding %s: %v", key, err)
		}
	}
	for _, name := range []string{managerRole, "fedfailover-metrics-auth"} {
		if err := host.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRoleBinding{}); err != nil {
			t.Errorf("ClusterRoleBinding %s: %v", name, err)
		}
	}
	ns := &corev1.Namespace{}
	if err := host.Get(ctx, client.ObjectKey{Name: deployNamespace}, ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s labels %v, want restricted Pod Security", deployNamespace, ns.Labels)
	}
}

// assertRemoved waits until the manager Deployment and its ClusterRole are gone.
func assertRemoved(t *testing.T, host client.Client) {
	t.Helper()
	eventually(t, 60*time.Second, "fedfailover removed", func(ctx context.Context) (bool, string) {
		errD := host.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: managerName}, &appsv1.Deployment{})
		errR := host.Get(ctx, client.ObjectKey{Name: managerRole}, &rbacv1.ClusterRole{})
		return apierrors.IsNotFound(errD) && apierrors.IsNotFound(errR), fmt.Sprintf("deployment: %v, clusterrole: %v", errD, errR)
	})
}

// deployTool is the path of a tool `make tools` builds; missing tools fail
// the test (never skip).
func deployTool(t *testing.T, name string) string {
	t.Helper()
	binDir := os.Getenv("LAB_BIN_DIR")
	if binDir == "" {
		binDir = lab.DefaultBinDir()
	}
	p := filepath.Join(binDir, name)
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		t.Fatalf("%s not found in %s: run `make tools`", name, binDir)
	}
	return p
}

func runTool(t *testing.T, stdin []byte, env []string, name string, args ...string) []byte {
	t.Helper()
	out, _ := runToolStderr(t, stdin, env, name, args...)
	return out
}

func runToolStderr(t *testing.T, stdin []byte, env []string, name string, args ...string) ([]byte, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), stderr.String()
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeObjects splits a multi-document YAML stream into objects.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.DecodeManifests(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

var (
	find    = testenv.FindObject
	hasKind = testenv.HasKind
)

func objectKeys(objs []*unstructured.Unstructured, skip map[string]bool) []string {
	var keys []string
	for _, o := range objs {
		if !skip[o.GetKind()] {
			keys = append(keys, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
		}
	}
	sort.Strings(keys)
	return keys
}

func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("converting %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func rulesOf(t *testing.T, u *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	var r struct {
		Rules []rbacv1.PolicyRule `json:"rules"`
	}
	convert(t, u, &r)
	return r.Rules
}

// assertRBACMatchesGenerated: the manager's ClusterRole and kubefed-namespace
// Role carry exactly the rules controller-gen generated, and are bound to
// the manager's ServiceAccount.
func assertRBACMatchesGenerated(t *testing.T, objs, generated []*unstructured.Unstructured) {
	t.Helper()
	n := 0
	for _, g := range generated {
		kind, ns := g.GetKind(), g.GetNamespace()
		if kind != "ClusterRole" && kind != "Role" {
			continue
		}
		n++
		if kind == "Role" && ns != kubefedNS {
			t.Errorf("generated Role is in %q; the chart and config/rbac bind it in %q", ns, kubefedNS)
		}
		got := find(objs, kind, ns, managerRole)
		if got == nil {
			t.Errorf("no %s %s/%s (generated in config/rbac/role.yaml)", kind, ns, managerRole)
			continue
		}
		if want, have := rulesOf(t, g), rulesOf(t, got); !reflect.DeepEqual(want, have) {
			t.Errorf("%s %s rules drifted from config/rbac/role.yaml (run `make manifests`):\n want %+v\n have %+v", kind, managerRole, want, have)
		}
		bindingKind := kind + "Binding"
		assertBoundToManager(t, objs, bindingKind, ns, managerRole, kind, managerRole)
	}
	if n == 0 {
		t.Fatal("config/rbac/role.yaml holds no ClusterRole or Role")
	}
}

func assertBoundToManager(t *testing.T, objs []*unstructured.Unstructured, kind, ns, name, roleKind, role string) {
	t.Helper()
	b := find(objs, kind, ns, name)
	if b == nil {
		t.Errorf("no %s %s/%s", kind, ns, name)
		return
	}
	var rb rbacv1.RoleBinding // same shape as ClusterRoleBinding
	convert(t, b, &rb)
	if rb.RoleRef.Kind != roleKind || rb.RoleRef.Name != role {
		t.Errorf("%s %s refers to %s %s, want %s %s", kind, name, rb.RoleRef.Kind, rb.RoleRef.Name, roleKind, role)
	}
	want := rbacv1.Subject{Kind: "ServiceAccount", Name: managerName, Namespace: deployNamespace}
	if !slices.Contains(rb.Subjects, want) {
		t.Errorf("%s %s does not bind %+v: %+v", kind, name, want, rb.Subjects)
	}
}

func assertCRDsMatchGenerated(t *testing.T, objs, crds []*unstructured.Unstructured) {
	t.Helper()
	for _, want := range crds {
		got := find(objs, "CustomResourceDefinition", "", want.GetName())
		if got == nil {
			t.Errorf("CRD %s missing", want.GetName())
			continue
		}
		// Tools may add labels; the schema and names must be identical.
		if !reflect.DeepEqual(want.Object["spec"], got.Object["spec"]) {
			t.Errorf("CRD %s drifted from config/crd/bases (run `make manifests`)", want.GetName())
		}
	}
}

// assertNoWildcards: least privilege, no "*" anywhere in any rule.
func assertNoWildcards(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	roles := 0
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		roles++
		if _, ok := o.Object["aggregationRule"]; ok {
			t.Errorf("%s %s aggregates other roles", o.GetKind(), o.GetName())
		}
		for _, r := range rulesOf(t, o) {
			for _, f := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
				for _, v := range f {
					if strings.Contains(v, "*") {
						t.Errorf("%s %s has a wildcard rule: %+v", o.GetKind(), o.GetName(), r)
					}
				}
			}
			if slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "impersonate") {
				t.Errorf("%s %s grants a privilege-escalating verb: %+v", o.GetKind(), o.GetName(), r)
			}
		}
	}
	if roles < 3 {
		t.Errorf("only %d roles rendered", roles)
	}
}

// assertMetricsRBAC: the manager may review tokens and access (secure
// metrics), and a reader role for /metrics exists.
func assertMetricsRBAC(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	auth := find(objs, "ClusterRole", "", "fedfailover-metrics-auth")
	if auth == nil {
		t.Error("no ClusterRole fedfailover-metrics-auth")
	} else {
		want := []rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		}
		if have := rulesOf(t, auth); !reflect.DeepEqual(want, have) {
			t.Errorf("metrics-auth rules: %+v", have)
		}
		assertBoundToManager(t, objs, "ClusterRoleBinding", "", "fedfailover-metrics-auth", "ClusterRole", "fedfailover-metrics-auth")
	}
	reader := find(objs, "ClusterRole", "", "fedfailover-metrics-reader")
	if reader == nil {
		t.Error("no ClusterRole fedfailover-metrics-reader")
		return
	}
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if have := rulesOf(t, reader); !reflect.DeepEqual(want, have) {
		t.Errorf("metrics-reader rules: %+v", have)
	}
}

func managerDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	u := find(objs, "Deployment", deployNamespace, managerName)
	if u == nil {
		t.Fatalf("no Deployment %s/%s", deployNamespace, managerName)
	}
	d := &appsv1.Deployment{}
	convert(t, u, d)
	return d
}

// assertManagerDeployment: 2 replicas, leader election, the restricted Pod
// Security Standard, probes on 8081 and the metrics port.
func assertManagerDeployment(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	d := managerDeployment(t, objs)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	spec := d.Spec.Template.Spec
	if spec.ServiceAccountName != managerName {
		t.Errorf("serviceAccountName = %q", spec.ServiceAccountName)
	}
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("host namespaces in the pod")
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("pod securityContext.seccompProfile is not RuntimeDefault")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("args %v lack --leader-elect", c.Args)
	}
	for _, want := range []string{"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081", "--kubefed-namespace=" + kubefedNS} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %v lack %s", c.Args, want)
		}
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("no container securityContext")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Privileged != nil && *sc.Privileged:
		t.Error("privileged container")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("container runAsNonRoot is not true")
	case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop ALL and add none", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Error("container seccompProfile is not RuntimeDefault")
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path {
			t.Errorf("no %s probe", path)
			continue
		}
		port := probe.HTTPGet.Port.IntVal
		if probe.HTTPGet.Port.StrVal != "" {
			port = ports[probe.HTTPGet.Port.StrVal]
		}
		if port != 8081 {
			t.Errorf("%s probe on port %d, want 8081", path, port)
		}
	}
	if ports["https-metrics"] != 8443 {
		t.Errorf("container ports %v: want https-metrics 8443", ports)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}
}

func assertMetricsService(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	u := find(objs, "Service", deployNamespace, "fedfailover-metrics")
	if u == nil {
		t.Error("no metrics Service")
		return
	}
	svc := &corev1.Service{}
	convert(t, u, svc)
	d := managerDeployment(t, objs)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("metrics Service selector %v does not select the manager pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.StrVal != "https-metrics" {
		t.Errorf("metrics Service ports %+v, want 8443 -> https-metrics", svc.Spec.Ports)
	}
}

// deleteNamespaceAndWait deletes a namespace the test created and waits until
// it is gone, so the next test does not meet it while it terminates.
func deleteNamespaceAndWait(t *testing.T, host client.Client, name string) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := host.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s: %v", name, err)
		return
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := host.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("namespace %s not gone after 2m: %v", name, err)
			return
		}
		time.Sleep(250 * time.Millisecond) // poll interval, bounded by the deadline
	}
}

// createRestrictedNamespace creates the install namespace on the host with
// the restricted Pod Security Standard enforced, and the manager's
// ServiceAccount in it, and removes them afterwards.
func createRestrictedNamespace(t *testing.T, host client.Client) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		"pod-security.kubernetes.io/warn":    "restricted",
	}}}
	if err := host.Create(t.Context(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", deployNamespace, err)
	}
	t.Cleanup(func() { deleteNamespaceAndWait(t, host, deployNamespace) })
	// The dry-run Pod below needs its ServiceAccount to exist.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: managerName, Namespace: deployNamespace}}
	if err := host.Create(t.Context(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating ServiceAccount %s: %v", managerName, err)
	}
	if err := host.Get(t.Context(), client.ObjectKey{Name: kubefedNS}, &corev1.Namespace{}); err != nil {
		t.Fatalf("the lab host has no %s namespace: %v", kubefedNS, err)
	}
}
