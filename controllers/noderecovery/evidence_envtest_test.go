package noderecovery

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/paths"
	"github.com/fedfailover/fedfailover/test/poll"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// Evidence-first detection through real API servers: a host (fedfailover,
// kubefed and Cluster API CRDs) and a member, joined as `kubefedctl join`
// does, read through the production member cache (member.SetupWithManager,
// its transforms and its live client). The reconciler is driven pass by pass
// on a clock of the test's own, so "15 s later" takes no 15 s. Only the live
// client is wrapped, to count the Lease reads and, in one test, to play a
// kubelet renewing its Lease between the decision and the act.

// evidenceEnv is the host, the member and a manager running the member
// controllers against them.
type evidenceEnv struct {
	runs     map[string]int // per test name: -count=N runs each test again on the same servers
	host     client.Client  // admin, host
	member   client.Client  // admin, member (plays the kubelets)
	mgr      ctrl.Manager
	cache    *member.Cache
	endpoint clusterv1.APIEndpoint
	cfg      *rest.Config // member admin
}

var (
	evidenceOnce sync.Once
	evidenceE    *evidenceEnv
	evidenceErr  error
	evidenceStop []func()
)

// startEvidenceEnv starts the two API servers and the manager on first use;
// every test of this file shares them (each with a member of its own), and
// TestMain stops them.
func startEvidenceEnv(t *testing.T) *evidenceEnv {
	t.Helper()
	evidenceOnce.Do(func() { evidenceE, evidenceErr = newEvidenceEnv() })
	if evidenceErr != nil {
		t.Fatalf("starting envtest host and member: %v", evidenceErr)
	}
	return evidenceE
}

func newEvidenceEnv() (*evidenceEnv, error) {
	crds, err := paths.HostCRDFiles()
	if err != nil {
		return nil, err
	}
	fence, err := paths.FenceAgentCRDDir() // remediation_envtest_test.go
	if err != nil {
		return nil, err
	}
	hostEnv, err := testenv.Environment(append(crds, fence)...)
	if err != nil {
		return nil, err
	}
	bin, err := testenv.BinDir()
	if err != nil {
		return nil, err
	}
	memberEnv := &envtest.Environment{BinaryAssetsDirectory: bin}
	hostEnv.ControlPlaneStartTimeout, memberEnv.ControlPlaneStartTimeout = 90*time.Second, 90*time.Second
	hostCfg, err := hostEnv.Start()
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	evidenceStop = append(evidenceStop, func() { _ = hostEnv.Stop() })
	memberCfg, err := memberEnv.Start()
	if err != nil {
		return nil, fmt.Errorf("member: %w", err)
	}
	evidenceStop = append(evidenceStop, func() { _ = memberEnv.Stop() })
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	e := &evidenceEnv{cfg: memberCfg, runs: map[string]int{}}
	if e.host, err = client.New(hostCfg, client.Options{Scheme: s}); err != nil {
		return nil, err
	}
	if e.member, err = client.New(memberCfg, client.Options{Scheme: clientgoscheme.Scheme}); err != nil {
		return nil, err
	}
	u, err := url.Parse(memberCfg.Host)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, err
	}
	e.endpoint = clusterv1.APIEndpoint{Host: u.Hostname(), Port: int32(port)}
	ctx := context.Background()
	for _, ns := range []string{member.DefaultNamespace, "capi"} {
		if err := e.host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	if err := e.member.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fencing.NodeLeaseNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	e.mgr, err = ctrl.NewManager(hostCfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(context.Background())
	evidenceStop = append(evidenceStop, cancel)
	e.cache, err = member.SetupWithManager(mctx, e.mgr, member.Options{Namespace: member.DefaultNamespace, ProbePeriod: time.Second,
		ProbeTimeout: 2 * time.Second, FailureThreshold: 3, ConnectTimeout: 5 * time.Second, RetryPeriod: 500 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	if err := e.mgr.GetFieldIndexer().IndexField(mctx, &v1alpha1.NodeRecovery{}, indexRecordCluster, func(o client.Object) []string {
		return []string{o.(*v1alpha1.NodeRecovery).Spec.Cluster}
	}); err != nil {
		return nil, err
	}
	go func() { _ = e.mgr.Start(mctx) }()
	return e, nil
}

// startEvidenceMember joins a member of its own named after base, with a
// policy of that detection, and two kubelets: the node under test (n1) and
// a healthy one (n2; one of two lost is within maxUnhealthy 50 %).
func startEvidenceMember(t *testing.T, base string, detection v1alpha1.NodeLossDetection, mut ...func(*v1alpha1.NodeRecoverySpec)) (e *evidenceEnv, cluster string, w *evidenceWorld, lost, healthy *kubelet) {
	t.Helper()
	e = startEvidenceEnv(t)
	cluster = e.unique(base)
	e.join(t, cluster)
	e.policyFor(t, cluster, detection, mut...)
	w = e.world(t, cluster)
	return e, cluster, w, e.kubelet(t, cluster+"-n1"), e.kubelet(t, cluster+"-n2")
}

// stopEvidenceEnv stops the servers startEvidenceEnv started (TestMain).
func stopEvidenceEnv() {
	for i := len(evidenceStop) - 1; i >= 0; i-- {
		evidenceStop[i]()
	}
}

// unique names a test's member: base on the first run, base-N on the Nth.
func (e *evidenceEnv) unique(base string) string {
	e.runs[base]++
	if n := e.runs[base]; n > 1 {
		return fmt.Sprintf("%s-%d", base, n)
	}
	return base
}

// join makes a member named cluster of the member API server, as
// `kubefedctl join` does: a service account with every permission in the
// member, its token in a host Secret, a KubeFedCluster labelled for the
// test's policy, and the member's Cluster API Cluster (its endpoint).
func (e *evidenceEnv) join(t *testing.T, cluster string) {
	t.Helper()
	ctx := context.Background()
	sa := cluster + "-host"
	role := "kubefed-controller-manager:" + sa
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: member.DefaultNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: member.DefaultNamespace, Name: sa}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{NonResourceURLs: []string{"*"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: member.DefaultNamespace, Name: sa}}},
	} {
		if err := e.member.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	cs, err := kubernetes.NewForConfig(e.cfg)
	must(t, err)
	tr, err := cs.CoreV1().ServiceAccounts(member.DefaultNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	must(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: member.DefaultNamespace, Name: cluster + "-token"},
		Data: map[string][]byte{"token": []byte(tr.Status.Token)}}
	must(t, e.host.Create(ctx, secret))
	kfc := &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: member.DefaultNamespace, Name: cluster,
		Labels: map[string]string{"evidence-test": cluster}},
		Spec: kubefedv1beta1.KubeFedClusterSpec{APIEndpoint: e.cfg.Host, CABundle: e.cfg.CAData,
			SecretRef: kubefedv1beta1.LocalSecretReference{Name: secret.Name}}}
	must(t, e.host.Create(ctx, kfc))
	must(t, e.host.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: cluster},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: e.endpoint}}))
	poll.T(t, 60*time.Second, 100*time.Millisecond, "member "+cluster+" connected", poll.NoError(func() error {
		if !e.cache.Connected(cluster) {
			return fmt.Errorf("not connected")
		}
		return nil
	}))
}

// policyFor creates the member's FailoverPolicy (its KubeFedCluster's
// label selects it): one per test, so that tests never share state. Its
// method is OutOfServiceTaint unless mut says otherwise.
func (e *evidenceEnv) policyFor(t *testing.T, cluster string, detection v1alpha1.NodeLossDetection, mut ...func(*v1alpha1.NodeRecoverySpec)) {
	t.Helper()
	all := intstr.FromString("50%")
	p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: cluster},
		Spec: v1alpha1.FailoverPolicySpec{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"evidence-test": cluster}},
			NodeRecovery: &v1alpha1.NodeRecoverySpec{NotReadyFor: "30s", Detection: detection, MaxUnhealthy: &all,
				Method:  v1alpha1.RecoveryMethodOutOfServiceTaint,
				Fencing: v1alpha1.FencingSpec{MachineInfrastructureDeleted: true}}}}
	for _, m := range mut {
		m(p.Spec.NodeRecovery)
	}
	must(t, e.host.Create(context.Background(), p))
}

// forceDelete is the method of members without the out-of-service taint.
func forceDelete(s *v1alpha1.NodeRecoverySpec) { s.Method = v1alpha1.RecoveryMethodForceDelete }

// kubelet plays one node's kubelet: a Node reporting Ready for an hour (the
// member's clock) and its Lease, renewed by renew.
type kubelet struct {
	e    *evidenceEnv
	node *corev1.Node
}

func (e *evidenceEnv) kubelet(t *testing.T, name string) *kubelet {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "test://" + name}}
	must(t, e.member.Create(ctx, n))
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))}}
	must(t, e.member.Status().Update(ctx, n))
	// The API server's TaintNodesByCondition admission created the Node
	// with node.kubernetes.io/not-ready:NoSchedule; the node lifecycle
	// controller (none runs here) removes it from a Ready node.
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
	must(t, e.member.Update(ctx, n))
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: fencing.NodeLeaseNamespace, Name: name,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: name, UID: n.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: ptr.To(metav1.NowMicro())}}
	must(t, e.member.Create(ctx, l))
	t.Cleanup(func() { // the member is shared: leave no node to the next test's storm guard
		_ = e.member.Delete(context.Background(), l)
		_ = e.member.Delete(context.Background(), n)
	})
	return &kubelet{e: e, node: n}
}

// renew renews the Lease, as the kubelet does every 10 s.
func (k *kubelet) renew(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{}
	must(t, k.e.member.Get(ctx, client.ObjectKey{Namespace: fencing.NodeLeaseNamespace, Name: k.node.Name}, l))
	l.Spec.RenewTime = ptr.To(metav1.NowMicro())
	must(t, k.e.member.Update(ctx, l))
}

// live is the Node as the member's API server has it.
func (k *kubelet) live(t *testing.T) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	must(t, k.e.member.Get(context.Background(), client.ObjectKeyFromObject(k.node), n))
	return n
}

// machine creates the node's Machine in the member's Cluster; gone makes it
// what an infrastructure provider leaves when the machine is deleted: being
// deleted (a finalizer holds it) with InfrastructureReady=False, reason
// ObjectDeleted (clusterv1.MachineInfrastructureDeletedReason).
func (e *evidenceEnv) machine(t *testing.T, cluster, node string, gone bool) {
	t.Helper()
	ctx := context.Background()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: node,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}, Finalizers: []string{"test.fedfailover.io/hold"}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, ProviderID: "test://" + node,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap-" + node)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.test.io", Kind: "TestMachine", Name: node}}}
	must(t, e.host.Create(ctx, m))
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	if gone {
		m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.MachineInfrastructureDeletedReason, Message: "", LastTransitionTime: metav1.Now()}}
	}
	must(t, e.host.Status().Update(ctx, m))
	if gone {
		must(t, e.host.Delete(ctx, m))
	}
}

// countingMembers is the production member cache; only its live client is
// wrapped: Lease reads are counted, and beforeLiveNode runs before the live
// re-read of a Node (the act's re-check, never the gather). When
// beforePodDelete or failNodePatch is set, the cached client is wrapped
// too: the first runs before each pod deletion fedfailover sends, the
// second may fail a Node patch before it is sent (reads still come from
// the member cache, listed instead of visited).
type countingMembers struct {
	*member.Cache
	mu              sync.Mutex
	leaseReads      map[string]int
	beforeLiveNode  func(name string)
	beforePodDelete func(p *corev1.Pod)
	failNodePatch   func(name string) error
	// liveErr, when set, is what every live read of the member fails with
	// (the member's API server unreachable from fedfailover).
	liveErr error
}

func (c *countingMembers) GetClient(ctx context.Context, cluster string) (client.Client, error) {
	cl, err := c.Cache.GetClient(ctx, cluster)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	h := &writeHooks{Client: cl, beforePodDelete: c.beforePodDelete, failNodePatch: c.failNodePatch}
	c.mu.Unlock()
	if h.beforePodDelete == nil && h.failNodePatch == nil {
		return cl, nil
	}
	return h, nil
}

// writeHooks runs beforePodDelete before every pod deletion through the
// client, and failNodePatch before every Node patch (an error fails it).
type writeHooks struct {
	client.Client
	beforePodDelete func(p *corev1.Pod)
	failNodePatch   func(name string) error
}

func (h *writeHooks) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if p, ok := obj.(*corev1.Pod); ok && h.beforePodDelete != nil {
		h.beforePodDelete(p)
	}
	return h.Client.Delete(ctx, obj, opts...)
}

func (h *writeHooks) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if n, ok := obj.(*corev1.Node); ok && h.failNodePatch != nil {
		if err := h.failNodePatch(n.Name); err != nil {
			return err
		}
	}
	return h.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingMembers) GetUncachedClient(ctx context.Context, cluster string) (client.Client, error) {
	c.mu.Lock()
	liveErr := c.liveErr
	c.mu.Unlock()
	if liveErr != nil {
		return nil, liveErr
	}
	live, err := c.Cache.GetUncachedClient(ctx, cluster)
	if err != nil {
		return nil, err
	}
	return interceptor.NewClient(live.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			c.mu.Lock()
			hook := c.beforeLiveNode
			switch obj.(type) {
			case *coordinationv1.Lease:
				c.leaseReads[key.Name]++
			case *corev1.Node:
				c.beforeLiveNode = nil
			}
			c.mu.Unlock()
			if _, ok := obj.(*corev1.Node); ok && hook != nil {
				hook(key.Name)
			}
			return cl.Get(ctx, key, obj, opts...)
		}}), nil
}

// Watch: passes are driven by the test, not by events.
func (c *countingMembers) Watch(context.Context, string, member.WatchInput) error { return nil }

func (c *countingMembers) reads(node string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseReads[node]
}

// evidenceWorld is one member's reconciler on the test's clock.
type evidenceWorld struct {
	t       *testing.T
	e       *evidenceEnv
	cluster string
	members *countingMembers
	r       *Reconciler
	mu      sync.Mutex
	now     time.Time
}

func (e *evidenceEnv) world(t *testing.T, cluster string) *evidenceWorld {
	w := &evidenceWorld{t: t, e: e, cluster: cluster, now: time.Now(),
		members: &countingMembers{Cache: e.cache, leaseReads: map[string]int{}}}
	w.r = w.reconciler()
	return w
}

// reconciler is a new process: its sightings start empty.
func (w *evidenceWorld) reconciler() *Reconciler {
	return &Reconciler{host: w.e.mgr.GetClient(), apiReader: w.e.mgr.GetAPIReader(), members: w.members,
		recorder: events.NewFakeRecorder(1000), store: newStore(), sightings: newSightings(),
		opts: Options{}.withDefaults(), capi: true, now: w.clock}
}

func (w *evidenceWorld) clock() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.now
}

func (w *evidenceWorld) advance(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.now = w.now.Add(d)
}

// pass runs one pass over the member.
func (w *evidenceWorld) pass() error {
	_, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: w.cluster}})
	return err
}

// passUntil runs passes (the clock standing still) until cond holds.
func (w *evidenceWorld) passUntil(what string, cond func() error) {
	w.t.Helper()
	poll.T(w.t, 30*time.Second, 100*time.Millisecond, what, poll.NoError(func() error {
		if err := w.pass(); err != nil {
			return err
		}
		return cond()
	}))
}

// firstReading waits for the pass that reads the node's Lease for the first
// time: the member cache has the Node, the host cache the Machine.
func (w *evidenceWorld) firstReading(k *kubelet) {
	w.t.Helper()
	w.passUntil("the first reading of "+k.node.Name+"'s Lease", func() error {
		if w.r.sightings.lease(w.cluster, k.node).FirstAt.IsZero() {
			return fmt.Errorf("not read yet")
		}
		return nil
	})
}

// seenByCache waits until the member cache holds the node and the host
// cache the Machine (or its absence), so that a pass decides on them.
func (w *evidenceWorld) seenByCache(k *kubelet, machine bool) {
	w.t.Helper()
	poll.T(w.t, 30*time.Second, 100*time.Millisecond, "the caches to hold "+k.node.Name, poll.NoError(func() error {
		cl, err := w.e.cache.GetClient(context.Background(), w.cluster)
		if err != nil {
			return err
		}
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(k.node), &corev1.Node{}); err != nil {
			return err
		}
		ms, err := w.e.cache.MachinesByNode(context.Background(), w.cluster)
		if err != nil {
			return err
		}
		if (ms[k.node.Name] != nil) != machine {
			return fmt.Errorf("Machine of %s: %v", k.node.Name, ms[k.node.Name])
		}
		return nil
	}))
}

// record is the node's newest NodeRecovery (nil: none).
func (w *evidenceWorld) record(node string) *v1alpha1.NodeRecovery {
	w.t.Helper()
	var list v1alpha1.NodeRecoveryList
	must(w.t, w.e.host.List(context.Background(), &list))
	var out *v1alpha1.NodeRecovery
	for i := range list.Items {
		if r := &list.Items[i]; r.Spec.Cluster == w.cluster && r.Spec.Node == node && (out == nil || r.CreationTimestamp.After(out.CreationTimestamp.Time)) {
			out = r
		}
	}
	return out
}

func tainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t == OutOfServiceTaint })
}

// lostTainted: the node carries a NoSchedule taint with fedfailover's
// lost key, whoever put it.
func lostTainted(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == contract.TaintLost && t.Effect == corev1.TaintEffectNoSchedule
	})
}

// namespace creates a namespace for a test's pods in the member.
func (e *evidenceEnv) namespace(t *testing.T, name string) string {
	t.Helper()
	must(t, e.member.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	t.Cleanup(func() {
		_ = e.member.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	return name
}

// pod creates a pod bound to node (as the scheduler's binding leaves it;
// no kubelet runs it).
func (e *evidenceEnv) pod(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "db", Image: "db"}}}}
	must(t, e.member.Create(context.Background(), p))
	return p
}

// schedule plays the member's scheduler for a replacement pod that
// tolerates nothing, over the test's nodes, with the default scheduler's own
// filters, read from the member's API server: a cordoned node
// (NodeUnschedulable) and a node with any NoSchedule or NoExecute taint
// (TaintToleration) are filtered out; the Ready condition is not read (the
// node lifecycle controller's taints stand for it). Of the rest it picks
// the node with the fewest pods, as least-allocated scoring does for pods
// that request alike; ties go by name. A node whose pods were just
// force-deleted is the emptiest: without a taint, the replacement lands
// there.
func (e *evidenceEnv) schedule(t *testing.T, nodes ...string) string {
	t.Helper()
	ctx := context.Background()
	var pods corev1.PodList
	must(t, e.member.List(ctx, &pods))
	count := map[string]int{}
	for _, p := range pods.Items {
		count[p.Spec.NodeName]++
	}
	best := ""
	for _, name := range slices.Sorted(slices.Values(nodes)) {
		n := &corev1.Node{}
		must(t, e.member.Get(ctx, client.ObjectKey{Name: name}, n))
		if n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool {
			return taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute
		}) {
			continue
		}
		if best == "" || count[name] < count[best] {
			best = name
		}
	}
	if best == "" {
		t.Fatalf("no node of %v fits", nodes)
	}
	return best
}

// podCached waits until the member cache holds this pod (its UID), not an
// earlier one of the same name.
func (w *evidenceWorld) podCached(p *corev1.Pod) {
	w.t.Helper()
	poll.T(w.t, 30*time.Second, 50*time.Millisecond, "the cache to hold pod "+p.Name+" "+string(p.UID), poll.NoError(func() error {
		cl, err := w.e.cache.GetClient(context.Background(), w.cluster)
		if err != nil {
			return err
		}
		cur := &corev1.Pod{}
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
			return err
		}
		if cur.UID != p.UID {
			return fmt.Errorf("the cache holds %s", cur.UID)
		}
		return nil
	}))
}

// podGone: the pod (this UID) no longer exists in the member.
func (w *evidenceWorld) podGone(p *corev1.Pod) error {
	cur := &corev1.Pod{}
	err := w.e.member.Get(context.Background(), client.ObjectKeyFromObject(p), cur)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case cur.UID == p.UID:
		return fmt.Errorf("pod %s still there", p.Name)
	}
	return nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEvidenceFirstDetection (1): the node still reports Ready (no node
// lifecycle controller has flipped it), its Machine's infrastructure is
// deleted and its Lease is not renewed: 15 s after fedfailover's first
// reading (its own clock) the node is tainted, without notReadyFor (30 s)
// and without the Ready condition changing. The record and the policy
// status say it was lost by evidence. A new process (restart) that finds
// the node still reporting Ready does not remove the taint until it has
// read the Lease renewed. On the old code nothing happened: the node is
// Ready.
func TestEvidenceFirstDetection(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-lost", "")
	e.machine(t, cluster, k.node.Name, true)
	w.seenByCache(k, true)

	w.firstReading(k)
	if n := k.live(t); tainted(n) || w.record(k.node.Name) != nil {
		t.Fatalf("acted on the first reading of the Lease: taints %v, record %v", n.Spec.Taints, w.record(k.node.Name))
	}
	w.advance(15 * time.Second)
	w.passUntil("the taint", func() error {
		if !tainted(k.live(t)) {
			return fmt.Errorf("not tainted")
		}
		return nil
	})
	n := k.live(t)
	if c := n.Status.Conditions[0]; c.Status != corev1.ConditionTrue {
		t.Fatalf("the node's Ready condition changed: %+v", c)
	}
	if lostTainted(n) {
		t.Fatalf("the out-of-service taint (NoExecute) keeps the scheduler away already, yet the node got a NoSchedule taint too: %v", n.Spec.Taints)
	}
	rec := w.record(k.node.Name)
	want := "lost by evidence: Machine capi/" + k.node.Name + " is being deleted and its infrastructure is gone " +
		"(InfrastructureReady=False, reason ObjectDeleted), kubelet Lease not renewed for 15s as seen by fedfailover"
	if rec == nil || rec.Status.Detection != v1alpha1.NodeLossDetectionEvidence || rec.Status.DetectedBy != want || rec.Status.ActedAt == nil {
		t.Fatalf("record %+v, want detection Evidence, detectedBy %q, acted", rec, want)
	}
	reps, _ := w.r.store.reports.Snapshot(cluster)
	if rs := reps[cluster].Recoveries; len(rs) != 1 || rs[0].Detection != v1alpha1.NodeLossDetectionEvidence {
		t.Errorf("status recoveries %+v, want one lost by evidence", rs)
	}

	// A restart: the new process has not read the Lease silent yet, and the
	// node still reports the Ready condition it was found lost with.
	w.r = w.reconciler()
	for range 3 {
		must(t, w.pass())
	}
	if n := k.live(t); !tainted(n) {
		t.Fatal("a restarted process removed the taint of a node whose kubelet it has not read renewed")
	}
	if rec := w.record(k.node.Name); rec.Status.Phase == v1alpha1.RecoveryPhaseFinished {
		t.Fatalf("a restarted process closed the record: %+v", rec.Status)
	}
	w.advance(15 * time.Second)
	must(t, w.pass())
	if n := k.live(t); !tainted(n) {
		t.Fatal("the taint went while the Lease stayed silent")
	}
	// The kubelet comes back: the Lease is renewed, the taint goes.
	k.renew(t)
	w.advance(2 * time.Second)
	w.passUntil("the taint removed", func() error {
		if tainted(k.live(t)) {
			return fmt.Errorf("still tainted")
		}
		return nil
	})
	if rec := w.record(k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseFinished || rec.Status.FinishReason != v1alpha1.FinishNodeReturned {
		t.Fatalf("record %+v, want finished NodeReturned", rec.Status)
	}
}

// TestEvidenceFirstLeaseRenewedBetweenReadings (2): the same, but the
// kubelet renews its Lease between fedfailover's readings (every 5 s of its
// clock, for a minute): nothing is done. Without the Lease readings the
// evidence alone would have tainted a node whose kubelet runs.
func TestEvidenceFirstLeaseRenewedBetweenReadings(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-renewed", "")
	e.machine(t, cluster, k.node.Name, true)
	w.seenByCache(k, true)
	w.firstReading(k)
	for i := range 12 {
		k.renew(t)
		w.advance(5 * time.Second)
		must(t, w.pass())
		if n := k.live(t); tainted(n) || w.record(k.node.Name) != nil {
			t.Fatalf("after %d s with the Lease renewed every 5 s: taints %v, record %v", 5*(i+1), n.Spec.Taints, w.record(k.node.Name))
		}
	}
	if got := w.r.sightings.lease(cluster, k.node); got.RenewedAt.IsZero() {
		t.Fatalf("the renewals were not read: %+v", got)
	}
}

// TestEvidenceFirstRenewalBeforeTheActCancelsIt (3): the pass finds the
// node lost by evidence, and the kubelet renews its Lease right before the
// act's live re-check (between the live re-read of the Node and of the
// Lease): the taint is not applied, the record says why, and the next pass
// closes it (the kubelet runs). Without the Lease in the re-check the node
// was tainted.
func TestEvidenceFirstRenewalBeforeTheActCancelsIt(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-recheck", "")
	e.machine(t, cluster, k.node.Name, true)
	w.seenByCache(k, true)
	w.firstReading(k)

	renewed := false
	w.members.mu.Lock()
	w.members.beforeLiveNode = func(name string) {
		if name == k.node.Name {
			k.renew(t)
			renewed = true
		}
	}
	w.members.mu.Unlock()
	w.advance(15 * time.Second)
	w.passUntil("a record of the loss", func() error {
		if w.record(k.node.Name) == nil {
			return fmt.Errorf("no record")
		}
		return nil
	})
	if !renewed {
		t.Fatal("the act never re-read the Node live")
	}
	if n := k.live(t); tainted(n) {
		t.Fatal("tainted although the kubelet renewed its Lease before the act")
	}
	rec := w.record(k.node.Name)
	if rec.Status.Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(rec.Status.Message, "kubelet renewed its Lease") || rec.Status.IntentAt != nil {
		t.Fatalf("record %+v, want Blocked, no intent, saying the kubelet renewed its Lease", rec.Status)
	}
	w.passUntil("the record closed", func() error {
		if rec := w.record(k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return fmt.Errorf("phase %s", rec.Status.Phase)
		}
		return nil
	})
	if n := k.live(t); tainted(n) {
		t.Fatal("tainted after all")
	}
}

// TestEvidenceFirstOffWithDetectionNotReady (4): with detection NotReady the
// old behaviour stays: the Lease is never read, a Ready node with its
// infrastructure deleted is not lost, and once the Ready condition turns
// Unknown the node is lost after notReadyFor (30 s) on fedfailover's clock.
func TestEvidenceFirstOffWithDetectionNotReady(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-notready", v1alpha1.NodeLossDetectionNotReady)
	e.machine(t, cluster, k.node.Name, true)
	w.seenByCache(k, true)
	for range 3 {
		must(t, w.pass())
		w.advance(15 * time.Second)
	}
	if n := k.live(t); tainted(n) || w.record(k.node.Name) != nil || w.members.reads(k.node.Name) != 0 {
		t.Fatalf("detection NotReady: taints %v, record %v, %d Lease reads; want nothing", n.Spec.Taints, w.record(k.node.Name), w.members.reads(k.node.Name))
	}
	// The node lifecycle controller marks the node Unknown.
	n := k.live(t)
	n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
	n.Status.Conditions[0].LastTransitionTime = metav1.Now()
	must(t, e.member.Status().Update(context.Background(), n))
	w.passUntil("the loss seen", func() error {
		w.r.sightings.mu.Lock()
		defer w.r.sightings.mu.Unlock()
		if w.r.sightings.m[cluster+"/"+k.node.Name].lossAt.IsZero() {
			return fmt.Errorf("not seen")
		}
		return nil
	})
	w.advance(29 * time.Second)
	must(t, w.pass())
	if tainted(k.live(t)) {
		t.Fatal("tainted before notReadyFor")
	}
	w.advance(2 * time.Second)
	w.passUntil("the taint", func() error {
		if !tainted(k.live(t)) {
			return fmt.Errorf("not tainted")
		}
		return nil
	})
	rec := w.record(k.node.Name)
	if rec.Status.Detection != v1alpha1.NodeLossDetectionNotReady || rec.Status.DetectedBy != "lost: not Ready for 31s as seen by fedfailover" {
		t.Fatalf("record %+v, want detection NotReady", rec.Status)
	}
	if r := w.members.reads(k.node.Name); r != 0 {
		t.Errorf("%d Lease reads with detection NotReady, want none", r)
	}
}

// TestEvidenceFirstNeedsEvidence (5): a Ready node whose Lease is never
// renewed but whose Machine is not being deleted is not lost, and its Lease
// is never read (the scale budget: only nodes with evidence are read).
func TestEvidenceFirstNeedsEvidence(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-noevidence", "")
	e.machine(t, cluster, k.node.Name, false)
	w.seenByCache(k, true)
	for range 5 {
		must(t, w.pass())
		w.advance(15 * time.Second)
	}
	n := k.live(t)
	if tainted(n) || w.record(k.node.Name) != nil || n.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Fatalf("no evidence, silent Lease: taints %v, record %v, Ready %s; want nothing", n.Spec.Taints, w.record(k.node.Name), n.Status.Conditions[0].Status)
	}
	if r := w.members.reads(k.node.Name); r != 0 {
		t.Errorf("%d Lease reads of a node without evidence, want none", r)
	}
}

// TestEvidenceFirstForceDeleteTaintsNoScheduleFirst (6): method ForceDelete
// (members without the out-of-service taint), the node lost by evidence
// while it still reports Ready=True and carries no taint. Before its pod is
// force-deleted, the node carries fedfailover's NoSchedule taint
// (failover.fedfailover.io/lost, valued with the record's UID), as read
// from the API server at the moment of the deletion; the replacement the
// StatefulSet controller creates is placed by the scheduler's rules on the
// other node, and stays there (no deletion again and again). An admin
// cordons the node meanwhile. When the kubelet renews its Lease the taint
// is removed, the cordon stays, and the record finishes. On the old code
// the node had no taint when the pod was deleted, and the replacement was
// scheduled back onto the dead node (the emptiest, and Ready as far as the
// scheduler knew).
func TestEvidenceFirstForceDeleteTaintsNoScheduleFirst(t *testing.T) {
	e, cluster, w, k, k2 := startEvidenceMember(t, "ev-force", "", forceDelete)
	e.machine(t, cluster, k.node.Name, true)
	ns := e.namespace(t, cluster)
	old := e.pod(t, ns, "db-0", k.node.Name)
	e.pod(t, ns, "web-0", k2.node.Name)
	w.seenByCache(k, true)
	w.podCached(old)

	var atDelete []*corev1.Node // the dead node as its API server had it at each deletion of db-0
	w.members.mu.Lock()
	w.members.beforePodDelete = func(p *corev1.Pod) {
		if p.Namespace == ns && p.Name == "db-0" {
			atDelete = append(atDelete, k.live(t))
		}
	}
	w.members.mu.Unlock()
	w.firstReading(k)
	if n := k.live(t); lostTainted(n) {
		t.Fatalf("tainted on the first reading of the Lease: %v", n.Spec.Taints)
	}
	w.advance(15 * time.Second)
	w.passUntil("db-0 force-deleted", func() error { return w.podGone(old) })

	if len(atDelete) == 0 {
		t.Fatal("the pod deletion was not seen")
	}
	for i, n := range atDelete {
		if !lostTainted(n) {
			t.Errorf("deletion %d of db-0: the node's taints were %v: nothing kept the scheduler away from it", i+1, n.Spec.Taints)
		}
		if c := n.Status.Conditions[0]; c.Status != corev1.ConditionTrue {
			t.Fatalf("deletion %d of db-0: the node was %s, want a node still reporting Ready=True", i+1, c.Status)
		}
	}
	// The StatefulSet controller re-creates db-0; the scheduler binds it.
	on := e.schedule(t, k.node.Name, k2.node.Name)
	if on == k.node.Name {
		t.Fatalf("the replacement was scheduled onto the dead node %s (Ready=True, taints %v)", on, k.live(t).Spec.Taints)
	}

	rec := w.record(k.node.Name)
	if rec == nil || rec.Status.Method != v1alpha1.RecoveryMethodForceDelete || rec.Status.Detection != v1alpha1.NodeLossDetectionEvidence ||
		rec.Status.LostTaint != v1alpha1.LostTaintOwned || rec.Status.ActedAt == nil {
		t.Fatalf("record %+v, want ForceDelete by evidence, lostTaint Owned, acted", rec)
	}
	ours := corev1.Taint{Key: contract.TaintLost, Value: string(rec.UID), Effect: corev1.TaintEffectNoSchedule}
	if !slices.Contains(atDelete[0].Spec.Taints, ours) {
		t.Fatalf("the node's taints at the deletion were %v, want %v (valued with the record's UID)", atDelete[0].Spec.Taints, ours)
	}
	if n := k.live(t); tainted(n) || len(n.Spec.Taints) != 1 {
		t.Fatalf("taints %v, want only %v (ForceDelete adds no out-of-service taint)", n.Spec.Taints, ours)
	}
	repl := e.pod(t, ns, "db-0", on)
	for range 3 {
		w.advance(time.Second)
		must(t, w.pass())
	}
	cur := &corev1.Pod{}
	must(t, e.member.Get(context.Background(), client.ObjectKeyFromObject(repl), cur))
	if cur.UID != repl.UID || cur.DeletionTimestamp != nil {
		t.Fatalf("the replacement on %s was deleted", on)
	}
	if len(atDelete) != 1 {
		t.Fatalf("db-0 was deleted %d times, want once", len(atDelete))
	}

	// An admin cordons the dead node: that is not fedfailover's to undo.
	n := k.live(t)
	n.Spec.Unschedulable = true
	must(t, e.member.Update(context.Background(), n))
	// The kubelet comes back: the Lease is renewed, the taint goes.
	k.renew(t)
	w.advance(2 * time.Second)
	w.passUntil("the NoSchedule taint removed", func() error {
		if n := k.live(t); slices.Contains(n.Spec.Taints, ours) {
			return fmt.Errorf("still tainted: %v", n.Spec.Taints)
		}
		return nil
	})
	if n := k.live(t); !n.Spec.Unschedulable || len(n.Spec.Taints) != 0 {
		t.Fatalf("after the return: unschedulable %v, taints %v; want the admin's cordon kept and no taint", n.Spec.Unschedulable, n.Spec.Taints)
	}
	rec = w.record(k.node.Name)
	if rec.Status.Phase != v1alpha1.RecoveryPhaseFinished || rec.Status.FinishReason != v1alpha1.FinishNodeReturned ||
		!strings.Contains(rec.Status.Message, "NoSchedule taint "+contract.TaintLost+" added by fedfailover removed") {
		t.Fatalf("record %+v, want finished NodeReturned, saying the NoSchedule taint was removed", rec.Status)
	}
}

// TestEvidenceFirstForceDeleteKeepsSomeoneElsesTaint (7): as (6), but the
// node already carries a NoSchedule taint with fedfailover's key, put by an
// admin (another value). fedfailover adds no second one, records it as
// preexisting, force-deletes the pod (the node is unschedulable anyway),
// and leaves the admin's taint in place when the node returns.
func TestEvidenceFirstForceDeleteKeepsSomeoneElsesTaint(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-force-admin", "", forceDelete)
	admins := corev1.Taint{Key: contract.TaintLost, Value: "maintenance", Effect: corev1.TaintEffectNoSchedule}
	n := k.live(t)
	n.Spec.Taints = []corev1.Taint{admins}
	must(t, e.member.Update(context.Background(), n))
	e.machine(t, cluster, k.node.Name, true)
	ns := e.namespace(t, cluster)
	old := e.pod(t, ns, "db-0", k.node.Name)
	w.seenByCache(k, true)
	w.podCached(old)
	w.firstReading(k)
	w.advance(15 * time.Second)
	w.passUntil("db-0 force-deleted", func() error { return w.podGone(old) })
	rec := w.record(k.node.Name)
	if rec == nil || rec.Status.LostTaint != v1alpha1.LostTaintPreexisting || rec.Status.ActedAt == nil {
		t.Fatalf("record %+v, want lostTaint Preexisting, acted", rec)
	}
	if n := k.live(t); !slices.Equal(n.Spec.Taints, []corev1.Taint{admins}) {
		t.Fatalf("taints %v, want only the admin's %v", n.Spec.Taints, admins)
	}
	k.renew(t)
	w.advance(2 * time.Second)
	w.passUntil("the record finished", func() error {
		if rec := w.record(k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return fmt.Errorf("phase %s", rec.Status.Phase)
		}
		return nil
	})
	if n := k.live(t); !slices.Equal(n.Spec.Taints, []corev1.Taint{admins}) {
		t.Fatalf("after the return: taints %v, want the admin's %v kept", n.Spec.Taints, admins)
	}
	if rec := w.record(k.node.Name); !strings.Contains(rec.Status.Message, "stays: it was there before fedfailover acted") {
		t.Fatalf("record message %q, want it to say the taint stays", rec.Status.Message)
	}
}

// TestEvidenceFirstForceDeleteRestartBetweenIntentAndTaint (8): as (6), but
// the process stops between the intent (lostTaint Owned) and the taint: its
// Node patch fails, and no pod is deleted. A new process, once it has read
// the Lease silent itself, adds the taint the intent decided before it
// deletes the pod.
func TestEvidenceFirstForceDeleteRestartBetweenIntentAndTaint(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-force-restart", "", forceDelete)
	e.machine(t, cluster, k.node.Name, true)
	ns := e.namespace(t, cluster)
	old := e.pod(t, ns, "db-0", k.node.Name)
	w.seenByCache(k, true)
	w.podCached(old)

	var atDelete []*corev1.Node
	w.members.mu.Lock()
	w.members.failNodePatch = func(name string) error {
		if name == k.node.Name {
			return fmt.Errorf("the process stopped before its taint patch")
		}
		return nil
	}
	w.members.beforePodDelete = func(p *corev1.Pod) {
		if p.Namespace == ns && p.Name == "db-0" {
			atDelete = append(atDelete, k.live(t))
		}
	}
	w.members.mu.Unlock()
	w.firstReading(k)
	w.advance(15 * time.Second)
	w.intentRecorded(k)
	rec := w.record(k.node.Name)
	if rec.Status.LostTaint != v1alpha1.LostTaintOwned || rec.Status.ActedAt != nil || len(atDelete) != 0 || lostTainted(k.live(t)) {
		t.Fatalf("record %+v, %d deletions, taints %v: want the intent (lostTaint Owned) only, nothing written", rec.Status, len(atDelete), k.live(t).Spec.Taints)
	}

	// A new process.
	w.members.mu.Lock()
	w.members.failNodePatch = nil
	w.members.mu.Unlock()
	w.r = w.reconciler()
	w.firstReading(k)
	w.advance(15 * time.Second)
	w.passUntil("db-0 force-deleted", func() error { return w.podGone(old) })
	ours := corev1.Taint{Key: contract.TaintLost, Value: string(rec.UID), Effect: corev1.TaintEffectNoSchedule}
	if len(atDelete) == 0 || !slices.Contains(atDelete[0].Spec.Taints, ours) {
		t.Fatalf("the node at the deletions: %v, want %v on it first", atDelete, ours)
	}
	if rec := w.record(k.node.Name); rec.Status.ActedAt == nil || rec.Status.LostTaint != v1alpha1.LostTaintOwned {
		t.Fatalf("record %+v, want acted with lostTaint Owned", rec.Status)
	}
}

// TestForeignOutOfServiceTaintBetweenIntentAndPatch (9): another remediator
// (self-node-remediation, a fence agent, a cloud provider) adds the very
// out-of-service taint fedfailover adds, after fedfailover recorded its
// intent and before its taint patch, which then fails on its optimistic
// lock. The next pass finds the taint there and adds none; fedfailover did
// not add it, so when the node returns the taint stays, for its owner to
// remove. On the old code the intent (no taint there before) made it
// fedfailover's, and the return removed another remediator's taint.
func TestForeignOutOfServiceTaintBetweenIntentAndPatch(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "ev-foreign-taint", "")
	e.machine(t, cluster, k.node.Name, true)
	w.seenByCache(k, true)

	foreign := 0
	w.members.mu.Lock()
	w.members.failNodePatch = func(name string) error {
		if name != k.node.Name || foreign > 0 {
			return nil
		}
		// The other remediator writes first; fedfailover's patch, locked
		// on the Node it read, then conflicts.
		foreign++
		n := k.live(t)
		n.Spec.Taints = append(n.Spec.Taints, OutOfServiceTaint)
		return e.member.Update(context.Background(), n)
	}
	w.members.mu.Unlock()
	w.firstReading(k)
	w.advance(15 * time.Second)
	poll.T(t, 30*time.Second, 100*time.Millisecond, "the act recorded", poll.NoError(func() error {
		_ = w.pass() // the pass whose patch conflicts fails
		if rec := w.record(k.node.Name); rec == nil || rec.Status.ActedAt == nil {
			return fmt.Errorf("not acted yet")
		}
		return nil
	}))
	if n := k.live(t); foreign != 1 || !slices.Equal(n.Spec.Taints, []corev1.Taint{OutOfServiceTaint}) {
		t.Fatalf("foreign writes %d, taints %v: want one write, only the other remediator's %v", foreign, n.Spec.Taints, OutOfServiceTaint)
	}
	acted := w.record(k.node.Name)

	// The node comes back.
	k.renew(t)
	w.advance(2 * time.Second)
	w.passUntil("the record finished", func() error {
		if rec := w.record(k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return fmt.Errorf("phase %s: %s", rec.Status.Phase, rec.Status.Message)
		}
		return nil
	})
	if !tainted(k.live(t)) {
		t.Fatal("fedfailover removed the out-of-service taint another remediator added")
	}
	rec := w.record(k.node.Name)
	if rec.Name != acted.Name || !rec.Status.TaintPreexisting || recordedOf(rec).OwnsTaint {
		t.Fatalf("record %s %+v: want %s, the taint recorded as not fedfailover's", rec.Name, rec.Status, acted.Name)
	}
	if !strings.Contains(rec.Status.Message, "the out-of-service taint stays") {
		t.Fatalf("record message %q, want it to say the taint stays", rec.Status.Message)
	}
}

// intentRecorded runs passes until the node's record holds an intent; a
// pass may fail once the act's write is tried (the tests that call it make
// that write fail).
func (w *evidenceWorld) intentRecorded(k *kubelet) {
	w.t.Helper()
	poll.T(w.t, 30*time.Second, 100*time.Millisecond, "the intent recorded", poll.NoError(func() error {
		_ = w.pass()
		if rec := w.record(k.node.Name); rec == nil || rec.Status.IntentAt == nil {
			return fmt.Errorf("no intent yet")
		}
		return nil
	}))
}
