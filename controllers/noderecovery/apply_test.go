package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/memberrbac"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/rbaccheck"
)

// fakeMembers is one connected member backed by a fake client: the apply
// steps' writes land in it and the test reads them back.
type fakeMembers struct {
	name     string
	client   client.Client
	live     client.Client // the API server itself; nil: the same as client (no cache lag)
	host     client.Client // holds the KubeFedCluster
	machines map[string]*clusterv1.Machine
	notHeld  bool // another replica holds the member's Lease
	// machineClients reach the Machines' API server; zero: the host.
	machineClients member.MachineClients
	// machinesErr fails the Machine lookups (e.g. a *member.ManagementError).
	machinesErr error
}

// memberRequests records what node recovery asks of members, for the
// check of TestMain against fedfailover's member role.
var memberRequests rbaccheck.Recorder

func TestMain(m *testing.M) {
	code := m.Run()
	stopEvidenceEnv()
	os.Exit(rbaccheck.After(code, &memberRequests, memberrbac.ByNodeRecovery))
}

func (f *fakeMembers) GetClient(_ context.Context, cluster string) (client.Client, error) {
	if cluster != f.name {
		return nil, &member.NotConnectedError{Cluster: cluster, Reason: "not a joined member"}
	}
	return memberRequests.Client(f.client), nil
}

func (f *fakeMembers) GetUncachedClient(ctx context.Context, cluster string) (client.Client, error) {
	if f.live != nil && cluster == f.name {
		return memberRequests.Client(f.live), nil
	}
	return f.GetClient(ctx, cluster)
}

func (f *fakeMembers) ServerVersion(string) (*version.Info, error) {
	return &version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2"}, nil
}

func (f *fakeMembers) MachinesByNode(context.Context, string) (map[string]*clusterv1.Machine, error) {
	if f.machinesErr != nil {
		return nil, f.machinesErr
	}
	if f.machines == nil {
		return nil, member.ErrNoCAPICluster
	}
	return f.machines, nil
}

func (f *fakeMembers) MachineClients(context.Context, string) (member.MachineClients, error) {
	if f.machinesErr != nil {
		return member.MachineClients{}, f.machinesErr
	}
	if f.machineClients.Live == nil {
		return member.MachineClients{Live: f.host, Writer: f.host}, nil
	}
	return f.machineClients, nil
}

func (f *fakeMembers) KubeFedCluster(ctx context.Context, cluster string) (*kubefedv1beta1.KubeFedCluster, error) {
	kfc := &kubefedv1beta1.KubeFedCluster{}
	return kfc, f.host.Get(ctx, client.ObjectKey{Namespace: member.DefaultNamespace, Name: cluster}, kfc)
}

func (f *fakeMembers) HoldsMember(string) bool { return !f.notHeld }

func (f *fakeMembers) Watch(context.Context, string, member.WatchInput) error { return nil }
func (f *fakeMembers) ConnectedClusters() []string                            { return []string{f.name} }

// recoveryWorld is a host (policy, KubeFedCluster) and one member with a
// StatefulSet-like pod db-0 whose claim data-db-0 is bound to pv-db-0 and
// attached to node n1. n2 is a healthy node for the replacement.
type recoveryWorld struct {
	t      *testing.T
	r      *Reconciler
	host   client.Client
	member client.Client
	now    time.Time
}

func newRecoveryWorld(t *testing.T, spec *v1alpha1.NodeRecoverySpec, dryRun bool, machine *clusterv1.Machine, memberObjs ...client.Object) *recoveryWorld {
	t.Helper()
	hs, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	if spec.MaxUnhealthy == nil {
		all := intstr.FromString("100%") // these tests are not about the storm guard
		spec.MaxUnhealthy = &all
	}
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour))},
		Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: spec, DryRun: dryRun}}
	kfc := &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Name: "member1", Namespace: member.DefaultNamespace}}
	hostObjs := []client.Object{pol, kfc}
	if machine != nil {
		// The cache's Machine and the host's are the same object: the live
		// re-read before a deletion finds it.
		machine.UID = "uid-machine-" + types.UID(machine.Name)
		hostObjs = append(hostObjs, machine.DeepCopy())
	}
	host := fake.NewClientBuilder().WithScheme(hs).WithObjects(hostObjs...).
		WithStatusSubresource(pol, &v1alpha1.NodeRecovery{}, &v1alpha1.RecoveryGuard{}).
		WithIndex(&v1alpha1.NodeRecovery{}, indexRecordCluster, func(o client.Object) []string {
			return []string{o.(*v1alpha1.NodeRecovery).Spec.Cluster}
		}).Build()
	mc := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(memberObjs...).Build()
	w := &recoveryWorld{t: t, host: host, member: mc, now: t0}
	fm := &fakeMembers{name: "member1", client: mc, host: host}
	if machine != nil {
		fm.machines = map[string]*clusterv1.Machine{machine.Status.NodeRef.Name: machine}
	}
	w.r = &Reconciler{host: host, apiReader: host, members: fm, recorder: events.NewFakeRecorder(1000),
		store: newStore(), sightings: newSightings(), opts: Options{}.withDefaults(), capi: true, now: func() time.Time { return w.now }}
	return w
}

// pass runs one Reconcile of the member and fails the test on error.
func (w *recoveryWorld) pass() ctrl.Result {
	w.t.Helper()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "member1"}})
	if err != nil {
		w.t.Fatalf("Reconcile: %v", err)
	}
	return res
}

// passLost runs the pass that first sees the lost nodes, then, notReadyFor
// later on the host's clock, the pass that finds them lost.
func (w *recoveryWorld) passLost() ctrl.Result {
	w.t.Helper()
	w.pass()
	w.now = w.now.Add(11 * time.Second)
	return w.pass()
}

// record returns the newest NodeRecovery record of a node (nil if none).
func (w *recoveryWorld) record(node string) *v1alpha1.NodeRecovery {
	w.t.Helper()
	var list v1alpha1.NodeRecoveryList
	if err := w.host.List(context.Background(), &list); err != nil {
		w.t.Fatal(err)
	}
	var out *v1alpha1.NodeRecovery
	for i := range list.Items {
		if r := &list.Items[i]; r.Spec.Node == node && (out == nil || r.Status.Phase != v1alpha1.RecoveryPhaseFinished) {
			out = r
		}
	}
	return out
}

// finished: the node's record is closed (or there is none).
func (w *recoveryWorld) finished(node string) bool {
	rec := w.record(node)
	return rec == nil || rec.Status.Phase == v1alpha1.RecoveryPhaseFinished
}

func (w *recoveryWorld) node(name string) *corev1.Node {
	w.t.Helper()
	n := &corev1.Node{}
	if err := w.member.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		w.t.Fatalf("getting node %s: %v", name, err)
	}
	return n
}

func (w *recoveryWorld) exists(obj client.Object, key client.ObjectKey) bool {
	w.t.Helper()
	err := w.member.Get(context.Background(), key, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("getting %s: %v", key, err)
	}
	return err == nil
}

func (w *recoveryWorld) recoveries() []v1alpha1.NodeRecoveryStatus {
	reps, _ := w.r.store.reports.Snapshot("p")
	return reps["member1"].Recoveries
}

func lostNode(name string, since time.Time) *corev1.Node {
	n := node(corev1.ConditionUnknown, since, nil)
	n.Name, n.UID = name, types.UID("uid-"+name)
	return n
}

func readyNode(name string) *corev1.Node {
	n := node(corev1.ConditionTrue, t0.Add(-time.Hour), nil)
	n.Name, n.UID = name, types.UID("uid-"+name)
	return n
}

func claimPod(name, nodeName, claim string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name + "-" + nodeName)},
		Spec: corev1.PodSpec{NodeName: nodeName, Volumes: []corev1.Volume{{Name: "data",
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}}}
	if ready {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

func boundClaim(name, pv string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv}}
}

func attachment(name, pv, nodeName string, attached bool) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.lab", NodeName: nodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached}}
}

func nodeHasOOSTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t == OutOfServiceTaint {
			return true
		}
	}
	return false
}

func methodPolicy(m v1alpha1.RecoveryMethod) *v1alpha1.NodeRecoverySpec {
	return policy(func(p *v1alpha1.NodeRecoverySpec) { p.Method = m })
}

// TestTaintMethodRecoversAndCleansUp follows one recovery through act,
// forceDelete, track and cleanup: the fenced node is tainted and marked, its
// pod force-deleted, the replacement tracked until its volume is attached
// elsewhere, and taint and marks removed once the node is Ready again.
func TestTaintMethodRecoversAndCleansUp(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	ctx := context.Background()

	w.passLost()
	n1 := w.node("n1")
	if !nodeHasOOSTaint(n1) {
		t.Fatalf("n1 taints = %v, want the out-of-service taint", n1.Spec.Taints)
	}
	if len(n1.Annotations) != 0 {
		t.Fatalf("node annotations %v: fedfailover keeps nothing on member Nodes", n1.Annotations)
	}
	rec := w.record("n1")
	if rec == nil || rec.Status.Method != v1alpha1.RecoveryMethodOutOfServiceTaint || !recordedOf(rec).OwnsTaint ||
		rec.Status.IntentAt == nil || rec.Status.ActedAt == nil || len(rec.Status.Claims) != 1 || rec.Status.Claims[0] != "default/data-db-0" ||
		rec.Spec.NodeUID != "uid-n1" || rec.Spec.Machine == nil || rec.Spec.Machine.UID == "" {
		t.Fatalf("record = %+v, want OutOfServiceTaint added by us, tracking default/data-db-0, with identities", rec)
	}
	if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("pod db-0 of the fenced node was not force-deleted")
	}
	if !w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-n1"}) {
		t.Fatal("with the taint method the attachment is left to the attach-detach controller, but it was deleted")
	}
	if rec := w.recoveries(); len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseRecovering {
		t.Fatalf("recoveries = %+v, want one Recovering", rec)
	}

	// The replacement runs on n2 but its volume is still attached to n1: not done.
	if err := w.member.Create(ctx, claimPod("db-0", "n2", "data-db-0", true)); err != nil {
		t.Fatal(err)
	}
	w.now = w.now.Add(5 * time.Second)
	w.pass()
	if rec := w.record("n1"); rec.Status.RecoveredAt != nil {
		t.Fatal("recovered while the volume is still attached to the fenced node")
	}
	// Detached from n1, attached to n2: recovered.
	if err := w.member.Delete(ctx, attachment("va-n1", "pv-db-0", "n1", true)); err != nil {
		t.Fatal(err)
	}
	if err := w.member.Create(ctx, attachment("va-n2", "pv-db-0", "n2", true)); err != nil {
		t.Fatal(err)
	}
	w.pass()
	if rec := w.record("n1"); rec.Status.RecoveredAt == nil || rec.Status.Phase != v1alpha1.RecoveryPhaseRecovered {
		t.Fatalf("not recorded recovered; recoveries %+v", w.recoveries())
	}
	if rec := w.recoveries(); len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseRecovered {
		t.Fatalf("recoveries = %+v, want one Recovered", rec)
	}

	// The node comes back: our taint goes and the record is closed.
	n1 = w.node("n1")
	n1.Status.Conditions[0].Status, n1.Status.Conditions[0].LastTransitionTime = corev1.ConditionTrue, metav1.NewTime(w.now)
	if err := w.member.Status().Update(ctx, n1); err != nil {
		t.Fatal(err)
	}
	w.pass()
	n1 = w.node("n1")
	if rec := w.record("n1"); nodeHasOOSTaint(n1) || rec.Status.Phase != v1alpha1.RecoveryPhaseFinished || rec.Status.FinishReason != v1alpha1.FinishNodeReturned {
		t.Fatalf("after return: taints %v record %+v, want no taint and the record finished", n1.Spec.Taints, rec.Status)
	}
}

// TestForceDeleteMethodDeletesPodsThenAttachments: without the taint, pods
// go first and the attachments of the fenced node follow once no remaining
// pod on it uses their volume.
func TestForceDeleteMethodDeletesPodsThenAttachments(t *testing.T) {
	keepPod := claimPod("other", "n1", "data-other", true)
	keepPod.Namespace = "kube-system" // out of the policy's pod scope
	w := newRecoveryWorld(t, policy(func(p *v1alpha1.NodeRecoverySpec) {
		p.Method = v1alpha1.RecoveryMethodForceDelete
		p.Pods.Namespaces = []string{"default"}
	}), false, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-db", "pv-db-0", "n1", true),
		keepPod, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-other", Namespace: "kube-system"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-other"}}, attachment("va-other", "pv-other", "n1", true))

	res := w.passLost()
	if nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("ForceDelete method tainted the node")
	}
	if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("in-scope pod not force-deleted")
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "kube-system", Name: "other"}) {
		t.Fatal("out-of-scope pod was deleted")
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > forceDeleteRecheck {
		t.Fatalf("RequeueAfter = %v, want a quick recheck (≤ %v) after deleting pods", res.RequeueAfter, forceDeleteRecheck)
	}
	w.now = w.now.Add(time.Second)
	w.pass()
	if w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-db"}) {
		t.Fatal("attachment of the deleted pod's volume was not deleted")
	}
	if !w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-other"}) {
		t.Fatal("attachment still used by a pod on the node was deleted")
	}
}

// TestNamespaceSelectorScope: pods.namespaceSelector is resolved against
// the member's Namespaces (a live list): only the pods of the namespaces it
// selects are force-deleted.
func TestNamespaceSelectorScope(t *testing.T) {
	other := claimPod("cache-0", "n1", "data-cache-0", true)
	other.Namespace = "team-b"
	ns := func(name, team string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}}}
	}
	w := newRecoveryWorld(t, policy(func(p *v1alpha1.NodeRecoverySpec) {
		p.Method = v1alpha1.RecoveryMethodForceDelete
		p.Pods.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	}), false, deletedMachine(), ns("default", "a"), ns("team-b", "b"),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), other)
	w.passLost()
	if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("the pod of a selected namespace was not force-deleted")
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "team-b", Name: "cache-0"}) {
		t.Fatal("the pod of a namespace the selector does not select was deleted")
	}
}

// TestNoEvidenceNoWrite: a lost node whose Machine is alive is Blocked, and
// nothing of the member is changed.
func TestNoEvidenceNoWrite(t *testing.T) {
	w := newRecoveryWorld(t, policy(), false, livingMachine(),
		lostNode("n1", t0.Add(-time.Minute)), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	before := w.node("n1").ResourceVersion
	w.passLost()
	if rv := w.node("n1").ResourceVersion; rv != before {
		t.Fatalf("node written without evidence (resourceVersion %s → %s)", before, rv)
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) ||
		!w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-n1"}) {
		t.Fatal("pod or attachment deleted without fencing evidence")
	}
	if rec := w.recoveries(); len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseBlocked {
		t.Fatalf("recoveries = %+v, want one Blocked", rec)
	}
}

// TestNoWriteWithoutTheMemberLease: with members sharded, a replica whose
// hold on the member's Lease ended writes nothing to it, even with proof.
func TestNoWriteWithoutTheMemberLease(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	w.r.members.(*fakeMembers).notHeld = true
	w.passLost()
	if n1 := w.node("n1"); nodeHasOOSTaint(n1) {
		t.Fatal("tainted a member node without holding the member's Lease")
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("deleted a pod without holding the member's Lease")
	}
	rec := w.recoveries()
	if len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(rec[0].Message, "does not hold member member1's lease") {
		t.Fatalf("recoveries = %+v, want one Blocked naming the Lease", rec)
	}
	// Events and decisions on transitions only: the refusal is reported
	// once, not on every pass while it lasts (it was once a second).
	blocked := func() int {
		_, decisions := w.r.store.reports.Snapshot("p")
		n := 0
		for _, d := range decisions {
			if d.Reason == ReasonFencingBlocked {
				n++
			}
		}
		return n
	}
	first := blocked()
	for range 3 {
		w.pass()
	}
	if got := blocked(); first != 1 || got != first {
		t.Fatalf("%d FencingBlocked decisions after the first refusal, %d after 3 more passes: want 1 and 1", first, got)
	}
}

// TestDryRunChangesNothingInTheMember decides and reports, but writes
// nothing to the member's Node, Pods or VolumeAttachments.
func TestDryRunChangesNothingInTheMember(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodForceDelete), true, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	before := w.node("n1").ResourceVersion
	w.passLost()
	w.pass()
	if rv := w.node("n1").ResourceVersion; rv != before {
		t.Fatalf("dry run wrote the node (resourceVersion %s → %s)", before, rv)
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) ||
		!w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-n1"}) {
		t.Fatal("dry run deleted a pod or an attachment")
	}
	var events corev1.EventList
	if err := w.member.List(context.Background(), &events); err != nil || len(events.Items) != 0 {
		t.Fatalf("dry run wrote %d events to the member (%v)", len(events.Items), err)
	}
	if rec := w.record("n1"); rec == nil || !rec.Status.DryRun || rec.Status.IntentAt != nil {
		t.Fatalf("record %+v, want a dry-run record with no intent", rec)
	}
	_, decisions := w.r.store.reports.Snapshot("p")
	if len(decisions) == 0 || !decisions[0].DryRun || decisions[0].Reason != ReasonWouldRecover {
		t.Fatalf("decisions = %+v, want a dry-run %s", decisions, ReasonWouldRecover)
	}
}

// TestOrphanNode: a deleted Node's pods and attachments are force-deleted
// only with fencing evidence from its Machine.
func TestOrphanNode(t *testing.T) {
	objs := func() []client.Object {
		return []client.Object{readyNode("n2"), claimPod("db-0", "gone", "data-db-0", true),
			boundClaim("data-db-0", "pv-db-0"), attachment("va-gone", "pv-db-0", "gone", true)}
	}
	machine := func(m *clusterv1.Machine) *clusterv1.Machine {
		m.Status.NodeRef.Name = "gone"
		return m
	}
	t.Run("infrastructure gone", func(t *testing.T) {
		w := newRecoveryWorld(t, policy(), false, machine(deletedMachine()), objs()...)
		w.pass()
		if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
			t.Fatal("pod of the deleted, fenced node not force-deleted")
		}
		w.pass()
		if w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-gone"}) {
			t.Fatal("attachment of the deleted, fenced node not deleted")
		}
	})
	t.Run("a Node of that name registers mid-pass", func(t *testing.T) {
		// Seed 104 of the fault campaign: a Machine replaced under the same
		// node name registers its Node between two force deletes of the
		// deleted Node's pods. The deletes after that must not happen.
		w := newRecoveryWorld(t, policy(), false, machine(deletedMachine()),
			append(objs(), claimPod("db-1", "gone", "data-db-1", true), boundClaim("data-db-1", "pv-db-1"))...)
		deletes := 0
		fm := w.r.members.(*fakeMembers)
		fm.client = interceptor.NewClient(w.member.(client.WithWatch), interceptor.Funcs{
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := c.Delete(ctx, obj, opts...); err != nil {
					return err
				}
				if deletes++; deletes == 1 {
					return c.Create(ctx, readyNode("gone"))
				}
				return nil
			},
		})
		w.pass()
		w.pass()
		if deletes != 1 {
			t.Fatalf("%d deletes, want 1: the ones after the replacement Node registered must not happen", deletes)
		}
		if !w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-gone"}) {
			t.Fatal("attachment deleted after a Node of that name registered")
		}
	})
	t.Run("a Machine other than the one recorded for the node", func(t *testing.T) {
		// Names are reused: the record of the node's loss names its Machine
		// by UID and the node's providerID; a Machine under the same name
		// that is not that one proves nothing about the deleted node.
		w := newRecoveryWorld(t, policy(), false, machine(deletedMachine()), objs()...)
		rec := &v1alpha1.NodeRecovery{ObjectMeta: metav1.ObjectMeta{Name: "member1.gone.x"},
			Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: "gone", NodeUID: "uid-gone", Policy: "p",
				ProviderID: "kwok://another-host", Machine: &v1alpha1.MachineReference{Namespace: "default", Name: "n1", UID: "uid-of-the-recorded-machine"}}}
		if err := w.host.Create(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		w.pass()
		w.pass()
		if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) ||
			!w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-gone"}) {
			t.Fatal("the deleted node's pod or attachment was deleted on the evidence of a Machine that is not the one recorded for it")
		}
		if st := w.recoveries(); len(st) != 1 || st[0].Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(st[0].Message, "another Machine under the same name") {
			t.Fatalf("status %+v, want Blocked naming the Machine mismatch", st)
		}
	})
	t.Run("a finished record of an earlier loss says nothing", func(t *testing.T) {
		// The node name had another Node and Machine before (replaced since):
		// that loss's record is finished and names the old Machine.
		w := newRecoveryWorld(t, policy(), false, machine(deletedMachine()), objs()...)
		old := &v1alpha1.NodeRecovery{ObjectMeta: metav1.ObjectMeta{Name: "member1.gone.old"},
			Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: "gone", NodeUID: "uid-old", Policy: "p",
				Machine: &v1alpha1.MachineReference{Namespace: "default", Name: "n1", UID: "uid-of-the-old-machine"}}}
		if err := w.host.Create(context.Background(), old); err != nil {
			t.Fatal(err)
		}
		old.Status.Phase, old.Status.FinishReason = v1alpha1.RecoveryPhaseFinished, v1alpha1.FinishNodeReturned
		if err := w.host.Status().Update(context.Background(), old); err != nil {
			t.Fatal(err)
		}
		w.pass()
		if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
			t.Fatal("pod of the deleted, fenced node not force-deleted: an earlier loss's record blocked it")
		}
	})
	t.Run("machine alive", func(t *testing.T) {
		w := newRecoveryWorld(t, policy(), false, machine(livingMachine()), objs()...)
		w.pass()
		w.pass()
		if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) ||
			!w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-gone"}) {
			t.Fatal("pod or attachment of a deleted node deleted without evidence")
		}
		rec := w.recoveries()
		if len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseBlocked || rec[0].Node != "gone" {
			t.Fatalf("recoveries = %+v, want node gone Blocked", rec)
		}
	})
}

// TestMemberNotConnected: a pass over a member the cache cannot reach waits
// for the connect event instead of failing.
func TestMemberNotConnected(t *testing.T) {
	w := newRecoveryWorld(t, policy(), false, nil)
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "member2"}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("Reconcile(not connected) = %+v, %v; want no error and no requeue", res, err)
	}
	if _, err := w.r.members.GetClient(context.Background(), "member2"); !errors.Is(err, member.ErrNotConnected) {
		t.Fatalf("fake returns %v, want ErrNotConnected", err)
	}
}

// TestForgedMarksDeleteNothing copies every mark fedfailover ever writes
// onto a node that is only partitioned (not Ready, Machine alive): no pod
// and no attachment may go, and the recovery is Blocked with the reason.
// On the old code the marks alone made every pass force-delete.
func TestForgedMarksDeleteNothing(t *testing.T) {
	forged := lostNode("n1", t0.Add(-time.Minute))
	forged.Annotations = contract.NodeMarks{LostSince: t0.Add(-time.Minute), FencedBy: "MachineInfrastructureDeleted",
		FencedAt: t0.Add(-30 * time.Second), Action: v1alpha1.RecoveryMethodForceDelete, TaintedByUs: true,
		Claims: []string{"default/data-db-0"}}.Annotations()
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodForceDelete), false, livingMachine(),
		forged, readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	for range 4 {
		w.pass()
		w.now = w.now.Add(6 * time.Second)
	}
	if n := w.node("n1"); contract.HasNodeMarks(n.Annotations) {
		t.Fatalf("forged annotations %v left on the node", n.Annotations)
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("forged marks got the pod of a live node force-deleted")
	}
	if !w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-n1"}) {
		t.Fatal("forged marks got the attachment of a live node deleted")
	}
	rec := w.recoveries()
	if len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(rec[0].Message, "no fencing evidence now") {
		t.Fatalf("recoveries = %+v, want one Blocked saying the marks are not evidence", rec)
	}
}

// TestLiveRecheckStopsStaleDecisions: the member cache still shows the node
// lost and its Machine's infrastructure deleted, but the API servers say
// otherwise (the node is Ready again; the Machine was replaced under the
// same name). Nothing destructive may be written on the cached view alone.
func TestLiveRecheckStopsStaleDecisions(t *testing.T) {
	objs := func() []client.Object {
		return []client.Object{lostNode("n1", t0.Add(-time.Minute)), claimPod("db-0", "n1", "data-db-0", true),
			boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true)}
	}
	check := func(t *testing.T, w *recoveryWorld) {
		t.Helper()
		w.passLost()
		if rec := w.record("n1"); nodeHasOOSTaint(w.node("n1")) || rec == nil || rec.Status.IntentAt != nil {
			t.Fatal("node tainted, or an intent recorded, on a stale cache")
		}
		if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
			t.Fatal("pod force-deleted on a stale cache")
		}
		rec := w.recoveries()
		if len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(rec[0].Message, "live read") {
			t.Fatalf("recoveries = %+v, want Blocked by the live re-read", rec)
		}
	}
	t.Run("node Ready again on the API server", func(t *testing.T) {
		w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(), objs()...)
		live := readyNode("n1")
		w.r.members.(*fakeMembers).live = fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(live).Build()
		check(t, w)
	})
	t.Run("Machine replaced under the same name", func(t *testing.T) {
		w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodForceDelete), false, deletedMachine(), objs()...)
		old := &clusterv1.Machine{}
		if err := w.host.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "n1"}, old); err != nil {
			t.Fatal(err)
		}
		// The old Machine finishes deleting; the host now holds a new,
		// healthy Machine of that name, while the cache still has the old one.
		old.Finalizers = nil
		if err := w.host.Update(context.Background(), old); err != nil {
			t.Fatal(err)
		}
		fresh := livingMachine()
		fresh.UID = "uid-machine-replacement"
		if err := w.host.Create(context.Background(), fresh); err != nil {
			t.Fatal(err)
		}
		check(t, w)
	})
}

// TestPausedPolicyWritesNothingToTheMember: a fenced node is neither
// tainted nor cleaned up, and no pod or attachment goes, while the policy is
// paused; unpausing resumes.
func TestPausedPolicyWritesNothingToTheMember(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodForceDelete), false, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	ctx := context.Background()
	setPaused := func(on bool) {
		t.Helper()
		pol := &v1alpha1.FailoverPolicy{}
		if err := w.host.Get(ctx, client.ObjectKey{Name: "p"}, pol); err != nil {
			t.Fatal(err)
		}
		pol.Spec.Paused = on
		if err := w.host.Update(ctx, pol); err != nil {
			t.Fatal(err)
		}
	}
	setPaused(true)
	before := w.node("n1").ResourceVersion
	w.passLost()
	if rv := w.node("n1").ResourceVersion; rv != before {
		t.Fatalf("paused policy wrote the node (resourceVersion %s → %s)", before, rv)
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) ||
		!w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-n1"}) {
		t.Fatal("paused policy deleted a pod or an attachment")
	}
	var events corev1.EventList
	if err := w.member.List(ctx, &events); err != nil || len(events.Items) != 0 {
		t.Fatalf("paused policy wrote %d events to the member (%v)", len(events.Items), err)
	}
	if rec := w.recoveries(); len(rec) != 1 || !strings.Contains(rec[0].Message, "paused") {
		t.Fatalf("recoveries = %+v, want one saying the policy is paused", rec)
	}
	setPaused(false)
	w.passLost()
	if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("unpaused: the fenced node's pod was not force-deleted")
	}
}

// TestNodeSelectorScope: by default a lost, fenced control-plane node is
// left alone; nodeSelector {} brings every node into scope.
func TestNodeSelectorScope(t *testing.T) {
	objs := func() []client.Object {
		cp := lostNode("n1", t0.Add(-time.Minute))
		cp.Labels = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		return []client.Object{cp, claimPod("db-0", "n1", "data-db-0", true), boundClaim("data-db-0", "pv-db-0")}
	}
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(), objs()...)
	w.passLost()
	if nodeHasOOSTaint(w.node("n1")) || !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("default nodeSelector: a control-plane node was acted on")
	}
	all := policy(func(p *v1alpha1.NodeRecoverySpec) {
		p.Method = v1alpha1.RecoveryMethodOutOfServiceTaint
		p.NodeSelector = &metav1.LabelSelector{}
	})
	w = newRecoveryWorld(t, all, false, deletedMachine(), objs()...)
	w.passLost()
	if !nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("nodeSelector {}: the fenced control-plane node was not tainted")
	}
}

// TestTaintStaysWhileTrackedVolumeAttached: a node that comes back keeps the
// out-of-service taint fedfailover added until the tracked claim's volume is
// detached from it (the old code removed it at once).
func TestTaintStaysWhileTrackedVolumeAttached(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	ctx := context.Background()
	w.passLost()
	if !nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("not tainted")
	}
	n1 := w.node("n1")
	n1.Status.Conditions[0].Status, n1.Status.Conditions[0].LastTransitionTime = corev1.ConditionTrue, metav1.NewTime(w.now)
	if err := w.member.Status().Update(ctx, n1); err != nil {
		t.Fatal(err)
	}
	res := w.pass()
	if !nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("taint removed while the tracked volume is still attached to the node")
	}
	if rec := w.recoveries(); len(rec) != 1 || !strings.Contains(rec[0].Message, "pv-db-0") || res.RequeueAfter <= 0 {
		t.Fatalf("recoveries %+v, requeue %v: want the wait explained and a recheck", rec, res.RequeueAfter)
	}
	reps, _ := w.r.store.reports.Snapshot("p")
	if left := reps["member1"].TaintsLeft; len(left) != 1 || !strings.Contains(left[0], "volume pv-db-0") {
		t.Fatalf("TaintsLeft %v, want the waiting taint explained (TaintRemovalPending)", left)
	}
	if err := w.member.Delete(ctx, attachment("va-n1", "pv-db-0", "n1", true)); err != nil {
		t.Fatal(err)
	}
	w.pass()
	if reps, _ := w.r.store.reports.Snapshot("p"); len(reps["member1"].TaintsLeft) != 0 {
		t.Fatalf("TaintsLeft %v after the removal", reps["member1"].TaintsLeft)
	}
	if n := w.node("n1"); nodeHasOOSTaint(n) || !w.finished("n1") {
		t.Fatalf("after the detach: taints %v record %+v, want no taint and the record finished", n.Spec.Taints, w.record("n1").Status)
	}
}

// TestFinalizerHeldPodIsNotDeletedAgain: a force-deleted pod that a
// finalizer holds is not deleted again on every pass (the old code did, once
// a second); the recovery says which finalizer it waits for, backs off, and
// still releases the volume's attachment.
func TestFinalizerHeldPodIsNotDeletedAgain(t *testing.T) {
	held := claimPod("db-0", "n1", "data-db-0", true)
	held.Finalizers = []string{"example.com/backup"}
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodForceDelete), false, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), held,
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	ctx := context.Background()
	w.passLost() // intent, action, then the grace-0 delete: the finalizer keeps the pod
	pod := &corev1.Pod{}
	if err := w.member.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db-0"}, pod); err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("pod after the force delete: %v (err %v), want deleting", pod.DeletionTimestamp, err)
	}
	rv := pod.ResourceVersion
	w.now = w.now.Add(time.Second)
	res := w.pass()
	if err := w.member.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db-0"}, pod); err != nil || pod.ResourceVersion != rv {
		t.Fatalf("held pod written again (resourceVersion %s → %s, err %v)", rv, pod.ResourceVersion, err)
	}
	if res.RequeueAfter < finalizerRecheck {
		t.Fatalf("RequeueAfter %v, want a back-off of at least %v", res.RequeueAfter, finalizerRecheck)
	}
	if rec := w.recoveries(); len(rec) != 1 || !strings.Contains(rec[0].Message, "finalizer example.com/backup on pod default/db-0") {
		t.Fatalf("recoveries %+v, want the finalizer named", rec)
	}
	if w.exists(&storagev1.VolumeAttachment{}, client.ObjectKey{Name: "va-n1"}) {
		t.Fatal("attachment of the held pod's volume not released")
	}
}

// TestMemberEventsPerPassAreCapped: when many nodes are lost at once, the
// pass acts on every one it can (the fenced n1 is tainted) and writes at
// most maxNodeEventsPerPass Events to the member, after acting; the policy's
// decisions still name every node.
func TestMemberEventsPerPassAreCapped(t *testing.T) {
	objs := []client.Object{lostNode("n1", t0.Add(-time.Minute)), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true)}
	const unfenced = maxNodeEventsPerPass + 10
	for i := range unfenced {
		name := fmt.Sprintf("lost-%02d", i)
		objs = append(objs, lostNode(name, t0.Add(-time.Minute)), claimPod("app-"+name, name, "data-"+name, true),
			boundClaim("data-"+name, "pv-"+name))
	}
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(), objs...)
	w.passLost()
	if !nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("the fenced node was not tainted in the pass that also found the others lost")
	}
	var events corev1.EventList
	if err := w.member.List(context.Background(), &events); err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != maxNodeEventsPerPass {
		t.Fatalf("%d events written to the member, want the cap %d (of %d transitions)", len(events.Items), maxNodeEventsPerPass, unfenced+1)
	}
	blocked := 0
	for _, st := range w.recoveries() {
		if st.Phase == v1alpha1.RecoveryPhaseBlocked {
			blocked++
		}
	}
	if blocked != unfenced {
		t.Fatalf("%d nodes reported Blocked, want every unfenced one (%d)", blocked, unfenced)
	}
}
