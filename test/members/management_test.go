package members

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/cli"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/logbuf"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// TestMachinesInAManagementCluster runs node recovery with a member whose
// Cluster API objects are in a management cluster (a second API server, not
// the host), named by its KubeFedCluster:
//   - the management cluster's Machine is the evidence: the node is tainted,
//     and its record names that Machine (UID); a healthy Machine of the same
//     names in the host is not read;
//   - a Machine there with another providerID fences nothing;
//   - explain reads the Machine there with a context of its own;
//   - credentials the management cluster refuses, and the management
//     cluster down, are the policy's MachineEvidenceUnavailable condition
//     (reason ManagementClusterUnavailable) and an event, and a node lost
//     meanwhile is not tainted although the cache last saw its Machine
//     fenced.
//
// Before the change no Machine was read anywhere but the host: the first
// node was never tainted and no condition named the management cluster.
func TestMachinesInAManagementCluster(t *testing.T) {
	f := env(t)
	ctx := context.Background()
	mgmt := startManagementCluster(t)
	alpha := f.members["alpha"]

	// The management cluster: alpha's Cluster (alpha's endpoint: verified
	// by the usual rule) and three Machines, each being deleted with its
	// infrastructure gone.
	mustCreate(t, mgmt.client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capi-mgmt"}})
	mustCreate(t, mgmt.client, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "capi-mgmt", Name: "alpha"},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: endpointOf(t, alpha.cfg.Host)}})
	fenced := map[string]*clusterv1.Machine{
		"mg-n0": goneMachine(t, mgmt.client, "capi-mgmt", "alpha", "mg-n0", "test://mg-n0"),
		// Another host's Machine that names the node: no evidence.
		"mg-n1": goneMachine(t, mgmt.client, "capi-mgmt", "alpha", "mg-n1", "test://another-host"),
		"mg-n2": goneMachine(t, mgmt.client, "capi-mgmt", "alpha", "mg-n2", "test://mg-n2"),
	}
	// The host holds a lookalike: alpha's Cluster and a healthy Machine of
	// mg-n0. Read from the host, mg-n0 would not be fenced.
	capiCluster(t, f, "capi-mgmt", "alpha", endpointOf(t, alpha.cfg.Host))
	machine(t, f, "capi-mgmt", "alpha", "mg-n0", "mg-n0")

	// fedfailover's credentials in the management cluster: read Machines
	// and Clusters, nothing else.
	token := f.memberToken(t, mgmt, "fedfailover-evidence", []rbacv1.PolicyRule{{APIGroups: []string{clusterv1.GroupVersion.Group},
		Resources: []string{"machines", "clusters"}, Verbs: []string{"get", "list", "watch"}}})
	kubeconfigSecret(t, f, "mgmt-kubeconfig", mgmt.cfg, token)
	kubeconfigSecret(t, f, "mgmt-bad-token", mgmt.cfg, "not-a-token")

	h := startRecoveryManager(t, f)
	labels := map[string]string{"mgmt-test": "yes"}
	a := f.join(t, "alpha", "alpha", labels)
	patchKFC(t, f, a, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Annotations = map[string]string{contract.AnnotationCAPIManagementCluster: "mgmt-kubeconfig"}
	})
	b := f.join(t, "beta", "beta", labels)
	patchKFC(t, f, b, func(k *kubefedv1beta1.KubeFedCluster) {
		k.Annotations = map[string]string{contract.AnnotationCAPIManagementCluster: "mgmt-bad-token"}
	})
	h.waitState(t, 20*time.Second, "alpha", true, "")
	pol := recoveryPolicy(t, f, "mgmt-recovery", labels)

	// Broken credentials: a condition naming beta, none naming alpha.
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMachineEvidenceUnavailable)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonManagementClusterUnavailable ||
			!strings.Contains(c.Message, "member beta") || !strings.Contains(c.Message, "401") || strings.Contains(c.Message, "member alpha") {
			return errorf("%s %+v, want True/%s naming beta's refused credentials only", v1alpha1.ConditionMachineEvidenceUnavailable, c, v1alpha1.ReasonManagementClusterUnavailable)
		}
		return nil
	})

	// Evidence in the management cluster: mg-n0 is tainted; mg-n1 is not.
	lostNodeIn(t, alpha, "mg-n0", "test://mg-n0")
	lostNodeIn(t, alpha, "mg-n1", "test://mg-n1")
	eventually(t, 40*time.Second, "mg-n0 tainted on the management cluster's evidence", func() error {
		if !tainted(t, alpha, "mg-n0") {
			return errorf("mg-n0 not tainted; recoveries %s", recoveriesOf(t, f, pol))
		}
		return nil
	})
	rec := recordOf(t, f, "alpha", "mg-n0")
	if rec == nil || rec.Spec.Machine == nil || rec.Spec.Machine.UID != string(fenced["mg-n0"].UID) {
		t.Fatalf("record %+v: want the management cluster's Machine (uid %s)", rec, fenced["mg-n0"].UID)
	}
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		for _, r := range p.Status.Recoveries {
			if r.Node == "mg-n1" && r.Phase == v1alpha1.RecoveryPhaseBlocked && strings.Contains(r.Message, "providerID") {
				return nil
			}
		}
		return errorf("no Blocked mg-n1 naming the providerID mismatch: %s", recoveriesOf(t, f, pol))
	})
	if tainted(t, alpha, "mg-n1") {
		t.Fatal("mg-n1 tainted on another host's Machine")
	}

	// explain reads the management cluster's Machine with a context of its
	// own, and only a note without one.
	var kfc kubefedv1beta1.KubeFedCluster
	must(t, f.host.Get(ctx, client.ObjectKeyFromObject(a.kfc), &kfc))
	snap := &cli.Snapshot{Clusters: []kubefedv1beta1.KubeFedCluster{kfc}}
	m, where, note, err := cli.FindMachine(ctx, cli.MachineSource{Host: f.host, Management: mgmt.client, ManagementContext: "mgmt"}, snap, "alpha", "mg-n0")
	if err != nil || m == nil || m.UID != fenced["mg-n0"].UID || !strings.Contains(where, "management cluster") {
		t.Fatalf("explain: Machine %v from %q, note %q, error %v; want the management cluster's", m, where, note, err)
	}
	if m, _, note, err := cli.FindMachine(ctx, cli.MachineSource{Host: f.host}, snap, "alpha", "mg-n0"); m != nil || err != nil || !strings.Contains(note, "--management-context") {
		t.Fatalf("explain without a management context: Machine %v, note %q, error %v; want a note", m, note, err)
	}

	// The management cluster goes down: a condition and an event, and a
	// node lost now is not tainted, though the cache last saw its Machine
	// fenced.
	must(t, mgmt.env.Stop())
	waitPolicy(t, f, pol, func(p *v1alpha1.FailoverPolicy) error {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMachineEvidenceUnavailable)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "member alpha") ||
			!strings.Contains(c.Message, "fencing evidence unavailable: management cluster") {
			return errorf("%s %+v, want True naming alpha's management cluster", v1alpha1.ConditionMachineEvidenceUnavailable, c)
		}
		return nil
	})
	lostNodeIn(t, alpha, "mg-n2", "test://mg-n2")
	eventually(t, 30*time.Second, "mg-n2 blocked for lack of evidence", func() error {
		for _, r := range recoveriesList(t, f, pol) {
			if r.Node == "mg-n2" && r.Phase == v1alpha1.RecoveryPhaseBlocked && strings.Contains(r.Message, "fencing evidence unavailable: management cluster") {
				return nil
			}
		}
		return errorf("no Blocked mg-n2 naming the management cluster: %s", recoveriesOf(t, f, pol))
	})
	time.Sleep(3 * time.Second) // more passes, still nothing
	if tainted(t, alpha, "mg-n2") {
		t.Fatal("mg-n2 tainted while its management cluster is down")
	}
	var evs eventsv1.EventList
	must(t, f.host.List(ctx, &evs))
	found := false
	for _, e := range evs.Items {
		if e.Regarding.Kind == "FailoverPolicy" && e.Regarding.Name == pol.Name && e.Reason == noderecovery.ReasonEvidenceUnavailable &&
			strings.Contains(e.Note, "management cluster of member alpha") {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s event on policy %s naming alpha", noderecovery.ReasonEvidenceUnavailable, pol.Name)
	}
}

// startManagementCluster starts a third API server with the Cluster API
// CRDs, stopped when the test ends (if the test has not stopped it).
func startManagementCluster(t *testing.T) *memberEnv {
	t.Helper()
	bin, err := testenv.BinDir()
	must(t, err)
	crds, err := hostCRDs()
	must(t, err)
	var capi []*apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Spec.Group == clusterv1.GroupVersion.Group {
			capi = append(capi, c)
		}
	}
	dir := filepath.Join(t.TempDir(), "mgmt")
	must(t, os.MkdirAll(dir, 0o700))
	m := &memberEnv{name: "mgmt", env: &envtest.Environment{BinaryAssetsDirectory: bin, ControlPlaneStartTimeout: 90 * time.Second,
		CRDs: capi, ControlPlane: envtest.ControlPlane{APIServer: &envtest.APIServer{CertDir: dir}}}}
	m.cfg, err = m.env.Start()
	must(t, err)
	t.Cleanup(func() { _ = m.env.Stop() })
	s, err := scheme.New()
	must(t, err)
	m.http, err = rest.HTTPClientFor(m.cfg)
	must(t, err)
	m.client, err = client.New(m.cfg, client.Options{Scheme: s, HTTPClient: m.http})
	must(t, err)
	return m
}

// kubeconfigSecret stores, in the kubefed namespace, a kubeconfig of the
// API server at cfg with a bearer token.
func kubeconfigSecret(t *testing.T, f *federation, name string, cfg *rest.Config, token string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["mgmt"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["fedfailover"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["mgmt"] = &clientcmdapi.Context{Cluster: "mgmt", AuthInfo: "fedfailover"}
	kc.CurrentContext = "mgmt"
	data, err := clientcmd.Write(*kc)
	must(t, err)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kubefedNS, Name: name}, Data: map[string][]byte{"kubeconfig": data}}
	mustCreate(t, f.host, s)
}

// goneMachine creates a Machine of cluster tied to node with providerID,
// then deletes it (a finalizer keeps it) and reports its infrastructure
// gone, as Cluster API does once the provider has removed the host.
func goneMachine(t *testing.T, c client.Client, ns, cluster, node, providerID string) *clusterv1.Machine {
	t.Helper()
	ctx := context.Background()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: node, Finalizers: []string{clusterv1.MachineFinalizer},
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, ProviderID: providerID,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap-" + node)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.test.io", Kind: "TestMachine", Name: node}},
	}
	must(t, c.Create(ctx, m))
	must(t, c.Delete(ctx, m))
	must(t, c.Get(ctx, client.ObjectKeyFromObject(m), m))
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineInfrastructureDeletedReason, LastTransitionTime: metav1.Now()}}
	must(t, c.Status().Update(ctx, m))
	return m
}

// lostNodeIn creates a Node whose kubelet stopped reporting (Ready=Unknown).
func lostNodeIn(t *testing.T, m *memberEnv, name, providerID string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	must(t, m.client.Create(ctx, n))
	t.Cleanup(func() { _ = m.client.Delete(context.Background(), n) })
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "NodeStatusUnknown"}}
	must(t, m.client.Status().Update(ctx, n))
}

func tainted(t *testing.T, m *memberEnv, node string) bool {
	t.Helper()
	n := &corev1.Node{}
	must(t, m.client.Get(context.Background(), client.ObjectKey{Name: node}, n))
	for _, tt := range n.Spec.Taints {
		if tt.Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

// recoveryPolicy is a node recovery policy acting one second after a loss,
// with the Machine's infrastructure deletion as evidence.
func recoveryPolicy(t *testing.T, f *federation, name string, labels map[string]string) *v1alpha1.FailoverPolicy {
	t.Helper()
	all := intstr.FromString("100%")
	p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.FailoverPolicySpec{ClusterSelector: &metav1.LabelSelector{MatchLabels: labels},
			NodeRecovery: &v1alpha1.NodeRecoverySpec{NotReadyFor: "1s", MaxUnhealthy: &all, Method: v1alpha1.RecoveryMethodOutOfServiceTaint,
				Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}}}}
	mustCreate(t, f.host, p)
	t.Cleanup(func() {
		ctx := context.Background()
		_ = f.host.Delete(ctx, p)
		_ = f.host.DeleteAllOf(ctx, &v1alpha1.NodeRecovery{})
	})
	return p
}

func recoveriesList(t *testing.T, f *federation, p *v1alpha1.FailoverPolicy) []v1alpha1.NodeRecoveryStatus {
	t.Helper()
	var got v1alpha1.FailoverPolicy
	must(t, f.host.Get(context.Background(), client.ObjectKeyFromObject(p), &got))
	return got.Status.Recoveries
}

func recoveriesOf(t *testing.T, f *federation, p *v1alpha1.FailoverPolicy) string {
	t.Helper()
	var parts []string
	for _, r := range recoveriesList(t, f, p) {
		parts = append(parts, r.Node+" "+string(r.Phase)+": "+r.Message)
	}
	return strings.Join(parts, "; ")
}

// recordOf is the active NodeRecovery record of a member node.
func recordOf(t *testing.T, f *federation, cluster, node string) *v1alpha1.NodeRecovery {
	t.Helper()
	var list v1alpha1.NodeRecoveryList
	must(t, f.host.List(context.Background(), &list))
	for i := range list.Items {
		r := &list.Items[i]
		if r.Spec.Cluster == cluster && r.Spec.Node == node && r.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return r
		}
	}
	return nil
}

func mustCreate(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	must(t, c.Create(context.Background(), o))
	t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
}

// startRecoveryManager runs the member and node recovery controllers (the
// manager's own wiring, controllers.Setup) on the host until the test ends.
func startRecoveryManager(t *testing.T, f *federation) *harness {
	t.Helper()
	logs := &logbuf.Buffer{}
	logger := zap.New(zap.WriteTo(logs), zap.UseDevMode(false), zap.Level(zapcore.Level(-2)))
	klog.SetLogger(logger)
	s, err := scheme.New()
	must(t, err)
	mgr, err := ctrl.NewManager(f.hostCfg, ctrl.Options{Scheme: s, Logger: logger,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	opts := testOptions()
	c, err := controllers.Setup(ctx, mgr, controllers.Options{KubefedNamespace: kubefedNS, Members: opts,
		NodeRecovery: noderecovery.Options{ResyncPeriod: 2 * time.Second, StatusResync: time.Second}, WithoutRebalance: true})
	must(t, err)
	// Registered first, so it runs once the manager stopped.
	t.Cleanup(func() {
		out := logs.String()
		for _, tok := range tokens.list() {
			if strings.Contains(out, tok) {
				t.Errorf("a token appears in the logs")
			}
		}
		if t.Failed() {
			if len(out) > 20000 {
				out = out[len(out)-20000:]
			}
			t.Logf("manager logs (tail):\n%s", out)
		}
	})
	testenv.RunManager(t, ctx, cancel, mgr)
	return &harness{cache: c, logs: logs, opts: opts}
}
