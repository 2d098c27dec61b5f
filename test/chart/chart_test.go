// Package chart tests what the Helm chart and the kustomize config render
// for their installation options, without a cluster: `helm template` and
// `kubectl kustomize` (built into bin/ by `make tools`), then assertions on
// the objects. test/e2e/deploy_test.go applies the default rendering to the
// lab's host API server.
package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/testenv"
)

const (
	release     = "fedfailover"
	namespace   = "fedfailover-system"
	kubeVersion = "v1.37.2"
	managerName = "fedfailover-controller-manager"
	// metricsHost is the metrics Service's DNS name: what the ServiceMonitor
	// verifies the manager's certificate against.
	metricsHost         = "fedfailover-metrics." + namespace + ".svc"
	machineDeletionRole = "fedfailover-machine-deletion"
)

// machineDeletionRules is the whole optional grant: delete on Machines.
var machineDeletionRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"delete"}},
}

// everyOption turns on every installation option that adds privileges,
// objects or flags.
var everyOption = []string{
	"nodeRecovery.machineDeletion.enabled=true", "members.allowInsecureEndpoints=true",
	"metrics.serviceMonitor.enabled=true", "metrics.tls.certManager.enabled=true",
	"metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true",
	"networkPolicy.enabled=true", "networkPolicy.apiServer.cidrs={10.96.0.10/32}", "networkPolicy.members.cidrs={0.0.0.0/0}",
	"nodeRecovery.remediation.kinds[0].apiGroup=lab.fedfailover.io", "nodeRecovery.remediation.kinds[0].version=v1alpha1",
	"nodeRecovery.remediation.kinds[0].kind=LabRemediation", "nodeRecovery.remediation.kinds[0].resource=labremediations",
	"nodeRecovery.remediation.kinds[0].templateResource=labremediationtemplates",
}

const remediationRole = "fedfailover-remediation"

func TestServiceMonitorVerifiesTheManagerCertificate(t *testing.T) {
	t.Run("default: verified, no insecureSkipVerify, no certificate mounted", func(t *testing.T) {
		objs := helmTemplate(t, "metrics.serviceMonitor.enabled=true")
		tls := serviceMonitorTLS(t, objs)
		if _, ok := tls["insecureSkipVerify"]; ok {
			t.Errorf("tlsConfig %v sets insecureSkipVerify by default", tls)
		}
		if tls["serverName"] != metricsHost {
			t.Errorf("tlsConfig serverName %v, want %s", tls["serverName"], metricsHost)
		}
		if _, ok := tls["ca"]; ok {
			t.Errorf("tlsConfig %v names a CA although no metrics.tls certificate is set", tls)
		}
		if arg := argWithPrefix(managerContainer(t, objs), "--metrics-cert-dir"); arg != "" {
			t.Errorf("manager has %s without metrics.tls", arg)
		}
	})

	t.Run("metrics.tls.secretName: CA of the Secret, certificate served from it", func(t *testing.T) {
		objs := helmTemplate(t, "metrics.serviceMonitor.enabled=true", "metrics.tls.secretName=metrics-tls")
		assertVerifiesWith(t, objs, "metrics-tls")
		assertServesCertificateOf(t, objs, "metrics-tls")
		if hasKind(objs, "Certificate") {
			t.Error("a cert-manager Certificate is rendered although certManager is off")
		}
	})

	t.Run("metrics.tls.certManager: Certificate for the Service name, self-signed Issuer", func(t *testing.T) {
		objs := helmTemplate(t, "metrics.serviceMonitor.enabled=true", "metrics.tls.certManager.enabled=true")
		const secret = "fedfailover-metrics-cert"
		assertVerifiesWith(t, objs, secret)
		assertServesCertificateOf(t, objs, secret)
		cert := find(objs, "Certificate", namespace, "fedfailover-metrics")
		if cert == nil {
			t.Fatal("no Certificate fedfailover-metrics")
		}
		spec, _ := cert.Object["spec"].(map[string]any)
		if spec["secretName"] != secret {
			t.Errorf("Certificate secretName %v, want %s", spec["secretName"], secret)
		}
		if dns, _ := spec["dnsNames"].([]any); !slices.Contains(dns, any(metricsHost)) {
			t.Errorf("Certificate dnsNames %v lack %s", dns, metricsHost)
		}
		issuer, _ := spec["issuerRef"].(map[string]any)
		if issuer["name"] != "fedfailover-selfsigned" || find(objs, "Issuer", namespace, "fedfailover-selfsigned") == nil {
			t.Errorf("issuerRef %v: want the chart's self-signed Issuer, rendered", issuer)
		}
	})

	t.Run("certManager with a given issuer: no Issuer of the chart", func(t *testing.T) {
		objs := helmTemplate(t, "metrics.tls.certManager.enabled=true", "metrics.tls.certManager.issuerRef.name=corp-ca",
			"metrics.tls.certManager.issuerRef.kind=ClusterIssuer")
		if hasKind(objs, "Issuer") {
			t.Error("the chart's Issuer is rendered although an issuer is given")
		}
		cert := find(objs, "Certificate", namespace, "fedfailover-metrics")
		if cert == nil {
			t.Fatal("no Certificate fedfailover-metrics")
		}
		spec, _ := cert.Object["spec"].(map[string]any)
		if issuer, _ := spec["issuerRef"].(map[string]any); issuer["name"] != "corp-ca" || issuer["kind"] != "ClusterIssuer" {
			t.Errorf("issuerRef %v, want ClusterIssuer corp-ca", issuer)
		}
	})

	t.Run("insecureSkipVerify only when set explicitly", func(t *testing.T) {
		tls := serviceMonitorTLS(t, helmTemplate(t, "metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.insecureSkipVerify=true"))
		if tls["insecureSkipVerify"] != true {
			t.Errorf("tlsConfig %v, want insecureSkipVerify: true", tls)
		}
	})
}

func TestMachineDeletionOnlyWhenEnabled(t *testing.T) {
	t.Run("chart default", func(t *testing.T) {
		objs := helmTemplate(t)
		assertNoMachineDeletion(t, objs)
	})
	t.Run("chart nodeRecovery.machineDeletion.enabled", func(t *testing.T) {
		objs := helmTemplate(t, "nodeRecovery.machineDeletion.enabled=true")
		assertMachineDeletion(t, objs)
	})
	t.Run("kustomize config/default", func(t *testing.T) {
		assertNoMachineDeletion(t, kustomize(t, false))
	})
	t.Run("kustomize config/default with the config/machine-deletion component", func(t *testing.T) {
		assertMachineDeletion(t, kustomize(t, true))
	})
	t.Run("chart and kustomize create the same objects with it", func(t *testing.T) {
		a := objectKeys(helmTemplate(t, "nodeRecovery.machineDeletion.enabled=true"))
		b := objectKeys(kustomize(t, true))
		if !slices.Equal(a, b) {
			t.Errorf("objects differ:\n helm:      %v\n kustomize: %v", a, b)
		}
	})
}

// TestRemediationKindsOnlyWhenListed: the remediation role exists only
// for the kinds the installation lists, with exactly the verbs remediation
// needs on each (create, get, list, watch, delete its remediations; get its
// templates), and each kind is passed to the manager to watch.
func TestRemediationKindsOnlyWhenListed(t *testing.T) {
	for name, objs := range map[string][]*unstructured.Unstructured{"chart default": helmTemplate(t), "kustomize": kustomize(t, true)} {
		if find(objs, "ClusterRole", "", remediationRole) != nil {
			t.Errorf("%s: ClusterRole %s rendered without kinds", name, remediationRole)
		}
		if c := managerContainer(t, objs); slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--remediation-kind") }) {
			t.Errorf("%s: --remediation-kind passed without kinds: %v", name, c.Args)
		}
	}
	objs := helmTemplate(t, everyOption...)
	role := find(objs, "ClusterRole", "", remediationRole)
	if role == nil {
		t.Fatalf("no ClusterRole %s", remediationRole)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"lab.fedfailover.io"}, Resources: []string{"labremediations"}, Verbs: []string{"create", "get", "list", "watch", "delete"}},
		{APIGroups: []string{"lab.fedfailover.io"}, Resources: []string{"labremediationtemplates"}, Verbs: []string{"get"}},
	}
	if have := rulesOf(t, role); !reflect.DeepEqual(have, want) {
		t.Errorf("%s rules %+v, want %+v", remediationRole, have, want)
	}
	b := find(objs, "ClusterRoleBinding", "", remediationRole)
	if b == nil {
		t.Fatalf("no ClusterRoleBinding %s", remediationRole)
	}
	if c := managerContainer(t, objs); !slices.Contains(c.Args, "--remediation-kind=LabRemediation.v1alpha1.lab.fedfailover.io") {
		t.Errorf("manager args %v lack the remediation kind", c.Args)
	}
	if out := helmTemplateFails(t, "nodeRecovery.remediation.kinds[0].apiGroup=*", "nodeRecovery.remediation.kinds[0].version=v1",
		"nodeRecovery.remediation.kinds[0].kind=X", "nodeRecovery.remediation.kinds[0].resource=x",
		"nodeRecovery.remediation.kinds[0].templateResource=y"); !strings.Contains(out, "apiGroup") {
		t.Errorf("a wildcard group was not refused by the values schema: %s", out)
	}
}

func TestInsecureMemberEndpointsOnlyWhenAsked(t *testing.T) {
	const flag = "--allow-insecure-member-endpoints"
	if slices.Contains(managerContainer(t, helmTemplate(t)).Args, flag) {
		t.Errorf("%s passed by default", flag)
	}
	if slices.Contains(managerContainer(t, kustomize(t, true)).Args, flag) {
		t.Errorf("%s passed by config/default", flag)
	}
	if !slices.Contains(managerContainer(t, helmTemplate(t, "members.allowInsecureEndpoints=true")).Args, flag) {
		t.Errorf("%s not passed with members.allowInsecureEndpoints=true", flag)
	}
}

// TestLeastPrivilege: whatever the options, no role has a wildcard, none may
// change Secrets, and none may change KubeFedClusters (whose spec says where
// member tokens are sent).
func TestLeastPrivilege(t *testing.T) {
	renderings := map[string][]*unstructured.Unstructured{
		"helm default":                 helmTemplate(t),
		"helm every option":            helmTemplate(t, everyOption...),
		"kustomize default":            kustomize(t, false),
		"kustomize + machine-deletion": kustomize(t, true),
	}
	for name, objs := range renderings {
		t.Run(name, func(t *testing.T) {
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
					if problem := ruleProblem(o.GetName(), r); problem != "" {
						t.Errorf("%s %s: %s: %+v", o.GetKind(), o.GetName(), problem, r)
					}
				}
			}
			if roles < 4 {
				t.Errorf("only %d roles rendered", roles)
			}
		})
	}
}

// ruleProblem says what is wrong with a rule of the role named role, or "".
func ruleProblem(role string, r rbacv1.PolicyRule) string {
	for _, f := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs} {
		if slices.ContainsFunc(f, func(v string) bool { return strings.Contains(v, "*") }) {
			return "wildcard"
		}
	}
	for _, v := range []string{"escalate", "bind", "impersonate"} {
		if slices.Contains(r.Verbs, v) {
			return "privilege-escalating verb " + v
		}
	}
	readOnly := !slices.ContainsFunc(r.Verbs, func(v string) bool { return !slices.Contains([]string{"get", "list", "watch"}, v) })
	switch {
	case grants(r, "", "secrets") && !readOnly:
		return "may change Secrets"
	case grants(r, "core.kubefed.io", "kubefedclusters") && !readOnly:
		return "may change KubeFedClusters"
	case grants(r, "cluster.x-k8s.io", "machines") && role != machineDeletionRole && !readOnly:
		return "may change Machines outside the Machine deletion role"
	}
	return ""
}

func grants(r rbacv1.PolicyRule, group, resource string) bool {
	return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource)
}

// TestRestrictedPodSecurityWithEveryOption: the options add a Secret volume
// and flags, nothing that leaves the restricted Pod Security Standard.
func TestRestrictedPodSecurityWithEveryOption(t *testing.T) {
	base, all := managerDeployment(t, helmTemplate(t)), managerDeployment(t, helmTemplate(t, everyOption...))
	if !reflect.DeepEqual(base.Spec.Template.Spec.SecurityContext, all.Spec.Template.Spec.SecurityContext) ||
		!reflect.DeepEqual(base.Spec.Template.Spec.Containers[0].SecurityContext, all.Spec.Template.Spec.Containers[0].SecurityContext) {
		t.Error("the options change the pod or container securityContext")
	}
	spec := all.Spec.Template.Spec
	if spec.HostNetwork || spec.HostPID || spec.HostIPC {
		t.Error("host namespaces in the pod")
	}
	for _, v := range spec.Volumes {
		if v.EmptyDir == nil && v.Secret == nil {
			t.Errorf("volume %s is neither emptyDir nor secret: %+v", v.Name, v.VolumeSource)
		}
	}
}

func assertVerifiesWith(t *testing.T, objs []*unstructured.Unstructured, secret string) {
	t.Helper()
	tls := serviceMonitorTLS(t, objs)
	if _, ok := tls["insecureSkipVerify"]; ok {
		t.Errorf("tlsConfig %v sets insecureSkipVerify", tls)
	}
	if tls["serverName"] != metricsHost {
		t.Errorf("tlsConfig serverName %v, want %s", tls["serverName"], metricsHost)
	}
	want := map[string]any{"secret": map[string]any{"name": secret, "key": "ca.crt"}}
	if !reflect.DeepEqual(tls["ca"], want) {
		t.Errorf("tlsConfig ca %v, want %v", tls["ca"], want)
	}
}

// assertServesCertificateOf: the Secret is mounted read-only where
// --metrics-cert-dir points.
func assertServesCertificateOf(t *testing.T, objs []*unstructured.Unstructured, secret string) {
	t.Helper()
	d := managerDeployment(t, objs)
	c := d.Spec.Template.Spec.Containers[0]
	dir := strings.TrimPrefix(argWithPrefix(c, "--metrics-cert-dir="), "--metrics-cert-dir=")
	if dir == "" {
		t.Fatalf("manager args %v lack --metrics-cert-dir", c.Args)
	}
	var volume string
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir && m.ReadOnly {
			volume = m.Name
		}
	}
	i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume })
	if volume == "" || i < 0 {
		t.Fatalf("nothing mounted read-only at %s: %+v", dir, c.VolumeMounts)
	}
	if v := d.Spec.Template.Spec.Volumes[i]; v.Secret == nil || v.Secret.SecretName != secret {
		t.Errorf("volume %s at %s is %+v, want Secret %s", volume, dir, v.VolumeSource, secret)
	}
}

func assertNoMachineDeletion(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		for _, r := range rulesOf(t, o) {
			if grants(r, "cluster.x-k8s.io", "machines") && slices.Contains(r.Verbs, "delete") {
				t.Errorf("%s %s may delete Machines: %+v", o.GetKind(), o.GetName(), r)
			}
		}
	}
	if find(objs, "ClusterRoleBinding", "", machineDeletionRole) != nil {
		t.Errorf("ClusterRoleBinding %s rendered", machineDeletionRole)
	}
	if c := managerContainer(t, objs); slices.Contains(c.Args, "--enable-machine-deletion") {
		t.Errorf("manager args %v enable Machine deletion", c.Args)
	}
}

func assertMachineDeletion(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	role := find(objs, "ClusterRole", "", machineDeletionRole)
	if role == nil {
		t.Fatalf("no ClusterRole %s", machineDeletionRole)
	}
	if have := rulesOf(t, role); !reflect.DeepEqual(have, machineDeletionRules) {
		t.Errorf("%s rules %+v, want only %+v", machineDeletionRole, have, machineDeletionRules)
	}
	b := find(objs, "ClusterRoleBinding", "", machineDeletionRole)
	if b == nil {
		t.Fatalf("no ClusterRoleBinding %s", machineDeletionRole)
	}
	var rb rbacv1.ClusterRoleBinding
	convert(t, b, &rb)
	want := rbacv1.Subject{Kind: "ServiceAccount", Name: managerName, Namespace: namespace}
	if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != machineDeletionRole || !slices.Contains(rb.Subjects, want) {
		t.Errorf("ClusterRoleBinding %s: roleRef %+v, subjects %+v; want %s bound to %+v", machineDeletionRole, rb.RoleRef, rb.Subjects, machineDeletionRole, want)
	}
	if c := managerContainer(t, objs); !slices.Contains(c.Args, "--enable-machine-deletion") {
		t.Errorf("manager args %v lack --enable-machine-deletion", c.Args)
	}
}

func serviceMonitorTLS(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	sm := find(objs, "ServiceMonitor", namespace, managerName)
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 {
		t.Fatalf("ServiceMonitor endpoints %v, want one", eps)
	}
	ep, _ := eps[0].(map[string]any)
	if ep["scheme"] != "https" {
		t.Errorf("ServiceMonitor scheme %v, want https", ep["scheme"])
	}
	tls, _ := ep["tlsConfig"].(map[string]any)
	return tls
}

func argWithPrefix(c corev1.Container, prefix string) string {
	for _, a := range c.Args {
		if strings.HasPrefix(a, prefix) {
			return a
		}
	}
	return ""
}

func managerDeployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	u := find(objs, "Deployment", namespace, managerName)
	if u == nil {
		t.Fatalf("no Deployment %s/%s", namespace, managerName)
	}
	d := &appsv1.Deployment{}
	convert(t, u, d)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(d.Spec.Template.Spec.Containers))
	}
	return d
}

func managerContainer(t *testing.T, objs []*unstructured.Unstructured) corev1.Container {
	t.Helper()
	return managerDeployment(t, objs).Spec.Template.Spec.Containers[0]
}

// helmTemplate renders the chart as `helm install fedfailover -n
// fedfailover-system` would, with --set values.
func helmTemplate(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", release, filepath.Join(repoRoot(t), "charts", "fedfailover"),
		"--namespace", namespace, "--kube-version", kubeVersion}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decode(t, run(t, tool(t, "helm"), []string{
		"HELM_CACHE_HOME=" + t.TempDir(), "HELM_CONFIG_HOME=" + t.TempDir(), "HELM_DATA_HOME=" + t.TempDir(),
	}, args...))
}

// TestManagementClusterRoles: what config/management-cluster grants in a
// Cluster API management cluster is reading Clusters and Machines (and
// MachineHealthChecks), nothing else; deleting Machines only with its
// machine-deletion component.
func TestManagementClusterRoles(t *testing.T) {
	read := []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"clusters", "machines"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machinehealthchecks"}, Verbs: []string{"get", "list"}},
	}
	del := []rbacv1.PolicyRule{{APIGroups: []string{"cluster.x-k8s.io"}, Resources: []string{"machines"}, Verbs: []string{"delete"}}}
	for _, withDeletion := range []bool{false, true} {
		got := map[string][]rbacv1.PolicyRule{}
		for _, o := range kustomizeManagement(t, withDeletion) {
			if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
				got[o.GetName()] = rulesOf(t, o)
				for _, r := range got[o.GetName()] {
					if problem := ruleProblem(o.GetName(), r); problem != "" {
						t.Errorf("%s: %s", o.GetName(), problem)
					}
				}
			}
		}
		want := map[string][]rbacv1.PolicyRule{"fedfailover-management-evidence": read}
		if withDeletion {
			want[machineDeletionRole] = del
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("machine deletion %v: roles\n  %+v\nwant\n  %+v", withDeletion, got, want)
		}
	}
}

// kustomizeManagement renders config/management-cluster, with its
// machine-deletion component when machineDeletion.
func kustomizeManagement(t *testing.T, machineDeletion bool) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	config, err := filepath.Rel(dir, filepath.Join(repoRoot(t), "config", "management-cluster"))
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + config + "\n"
	if machineDeletion {
		k += "components:\n  - " + filepath.Join(config, "machine-deletion") + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return decode(t, run(t, tool(t, "kubectl"), nil, "kustomize", dir))
}

// kustomize renders config/default, with the config/machine-deletion
// component when machineDeletion, through an overlay as the component's
// kustomization.yaml tells users to write it.
func kustomize(t *testing.T, machineDeletion bool) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	config, err := filepath.Rel(dir, filepath.Join(repoRoot(t), "config"))
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + filepath.Join(config, "default") + "\n"
	if machineDeletion {
		k += "components:\n  - " + filepath.Join(config, "machine-deletion") + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return decode(t, run(t, tool(t, "kubectl"), nil, "kustomize", dir))
}

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := paths.Tool(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := paths.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func run(t *testing.T, name string, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

func decode(t *testing.T, data []byte) []*unstructured.Unstructured {
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

// objectKeys lists kind namespace/name, without the Namespace (helm
// installs into an existing one) and CRDs (helm installs them from crds/).
func objectKeys(objs []*unstructured.Unstructured) []string {
	var keys []string
	for _, o := range objs {
		if k := o.GetKind(); k != "Namespace" && k != "CustomResourceDefinition" {
			keys = append(keys, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
		}
	}
	slices.Sort(keys)
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
