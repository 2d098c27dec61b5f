package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// envtestMember starts one real API server and returns a Lab handle whose
// member1 is it (its state recorded in a temporary folder, the client
// injected). The member's API server record points at this test process,
// so the lab's controllers see it running.
func envtestMember(t *testing.T, o Options) (*Lab, client.Client) {
	t.Helper()
	env := &envtest.Environment{BinaryAssetsDirectory: DefaultBinDir(), ControlPlaneStartTimeout: 90 * time.Second}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cl, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o.Members, o.NodeCPU, o.NodeMemory, o.NodePods = 1, "4", "16Gi", "110"
	etcdPort, err := strconv.Atoi(env.ControlPlane.Etcd.URL.Port())
	if err != nil {
		t.Fatalf("envtest's etcd URL %s: %v", env.ControlPlane.Etcd.URL, err)
	}
	member := &ClusterState{Name: "member1", Role: RoleMember, Index: 1, Dir: dir, EtcdPort: etcdPort,
		Nodes: []NodeState{{Name: "member1-node-1", Zone: "member1-zone-a"}}}
	st := &State{Dir: dir, Options: o, Clusters: []*ClusterState{{Name: HostName, Role: RoleHost, Dir: dir}, member},
		Procs: []*Proc{{Component: CompAPIServer, Cluster: "member1", PID: os.Getpid()}}}
	if err := withStateLock(dir, func() error { return writeState(dir, st) }); err != nil {
		t.Fatal(err)
	}
	l := &Lab{Dir: dir, opts: o, logf: t.Logf, clients: map[string]client.Client{"member1": cl}}
	return l, cl
}

func TestStaticBulkNeedsNoNodeLifecycle(t *testing.T) {
	l := &Lab{opts: Options{}}
	if _, err := l.AddStaticNodes(context.Background(), "member1", 1, true); !errors.Is(err, errNeedsNoNodeLifecycle) {
		t.Errorf("static nodes on a lab with the node-lifecycle controller: %v", err)
	}
	if err := l.CreateStaticPods(context.Background(), "member1", "bench", []string{"n"}, 1, 0); !errors.Is(err, errNeedsNoNodeLifecycle) {
		t.Errorf("static pods on a lab with the node-lifecycle controller: %v", err)
	}
}

// Static bulk objects are written once: Ready nodes, Running and Ready
// pods, created again without a write; a status report moves only the
// heartbeat. Written through the API server or straight into etcd
// (BulkViaEtcd), a client reads the same objects.
func TestStaticBulkIsWrittenOnce(t *testing.T) {
	for _, viaEtcd := range []bool{false, true} {
		t.Run(fmt.Sprintf("viaEtcd=%t", viaEtcd), func(t *testing.T) { testStaticBulk(t, viaEtcd) })
	}
}

func testStaticBulk(t *testing.T, viaEtcd bool) {
	l, cl := envtestMember(t, Options{NoNodeLifecycle: true, BulkViaEtcd: viaEtcd})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names, err := l.AddStaticNodes(ctx, "member1", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	rv := map[string]string{}
	for _, name := range names {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		if NodeReadyStatus(n) != corev1.ConditionTrue || !n.Spec.Unschedulable || n.Labels[FailureDomainLabel] != StaticDomain ||
			n.Status.Allocatable.Cpu().String() != "4" {
			t.Errorf("node %s: Ready %s, unschedulable %t, domain %q, allocatable cpu %s", name, NodeReadyStatus(n),
				n.Spec.Unschedulable, n.Labels[FailureDomainLabel], n.Status.Allocatable.Cpu())
		}
		// What the API server adds on create: a uid, the not-ready taint
		// (TaintNodesByCondition), a managedFields entry with a time.
		notReady := slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool {
			return x.Key == corev1.TaintNodeNotReady && x.Effect == corev1.TaintEffectNoSchedule
		})
		if n.UID == "" || !notReady || len(n.ManagedFields) == 0 || n.ManagedFields[0].Time == nil {
			t.Errorf("node %s: uid %q, taints %v, managedFields %v", name, n.UID, n.Spec.Taints, n.ManagedFields)
		}
		rv[name] = n.ResourceVersion
	}
	// The lab's own controllers list only the nodes that are not static.
	labNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "member1-node-1", Labels: map[string]string{FailureDomainLabel: "member1-zone-a"}}}
	if err := cl.Create(ctx, labNode); err != nil {
		t.Fatal(err)
	}
	var listed corev1.NodeList
	if err := cl.List(ctx, &listed, notStaticNodes); err != nil {
		t.Fatal(err)
	}
	if len(listed.Items) != 1 || listed.Items[0].Name != labNode.Name {
		t.Errorf("nodes that are not static: %d listed, want only %s", len(listed.Items), labNode.Name)
	}
	if _, err := l.AddStaticNodes(ctx, "member1", 3, true); err != nil {
		t.Fatalf("adding the same static nodes again: %v", err)
	}
	for _, name := range names {
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		if n.ResourceVersion != rv[name] {
			t.Errorf("node %s written again (resourceVersion %s -> %s)", name, rv[name], n.ResourceVersion)
		}
	}

	if err := l.CreateStaticPods(ctx, "member1", "bench", names, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateStaticPods(ctx, "member1", "bench", names, 2, 3); err != nil {
		t.Fatalf("creating the same static pods again: %v", err)
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace("bench")); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 6 {
		t.Fatalf("%d pods, want 6", len(pods.Items))
	}
	claims := 0
	for _, p := range pods.Items {
		ready := false
		for _, c := range p.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		if p.Status.Phase != corev1.PodRunning || !ready || p.Spec.NodeName == "" || p.Status.PodIP == "" {
			t.Errorf("pod %s: phase %s, ready %t, node %q, IP %q", p.Name, p.Status.Phase, ready, p.Spec.NodeName, p.Status.PodIP)
		}
		// The API server's QoS class, and its defaults applied on read.
		if p.UID == "" || p.Status.QOSClass != corev1.PodQOSBurstable || p.Spec.RestartPolicy != corev1.RestartPolicyAlways ||
			p.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("pod %s: uid %q, QoS %q, restartPolicy %q, scheduler %q", p.Name, p.UID, p.Status.QOSClass, p.Spec.RestartPolicy, p.Spec.SchedulerName)
		}
		if len(p.Spec.Volumes) > 0 {
			claims++
			if viaEtcd { // through the API server, binding is kube-controller-manager's, absent here
				pvc := &corev1.PersistentVolumeClaim{}
				if err := cl.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName}, pvc); err != nil {
					t.Fatal(err)
				}
				pv := &corev1.PersistentVolume{}
				if err := cl.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
					t.Fatal(err)
				}
				if pvc.Status.Phase != corev1.ClaimBound || pv.Status.Phase != corev1.VolumeBound || pv.Spec.ClaimRef.UID != pvc.UID {
					t.Errorf("claim %s %s, volume %s %s bound to uid %s (claim's %s)", pvc.Name, pvc.Status.Phase, pv.Name, pv.Status.Phase, pv.Spec.ClaimRef.UID, pvc.UID)
				}
				// Attached under the attach-detach controller's name for it.
				va := &storagev1.VolumeAttachment{}
				if err := cl.Get(ctx, client.ObjectKey{Name: AttachmentName(pv.Spec.CSI.VolumeHandle, CSIDriverName, p.Spec.NodeName)}, va); err != nil {
					t.Fatalf("the VolumeAttachment of %s on %s: %v", pv.Name, p.Spec.NodeName, err)
				}
				if !va.Status.Attached || *va.Spec.Source.PersistentVolumeName != pv.Name || !hasString(va.Finalizers, attacherFinalizer) {
					t.Errorf("VolumeAttachment %s: attached %t, volume %s, finalizers %v", va.Name, va.Status.Attached, *va.Spec.Source.PersistentVolumeName, va.Finalizers)
				}
			}
		}
	}
	if claims != 2 {
		t.Errorf("%d pods with a claim, want 2 (pods 0 and 3 of 6)", claims)
	}

	// kube-controller-manager's attach-detach controller creates the
	// VolumeAttachments; the bench attaches those of static nodes once.
	va := func(name, pv, node string) *storagev1.VolumeAttachment {
		return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.VolumeAttachmentSpec{
			Attacher: CSIDriverName, NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To(pv)}}}
	}
	for _, v := range []*storagev1.VolumeAttachment{va("va-0", "pv-a", names[0]), va("va-1", "pv-b", names[1]), va("va-lab", "pv-c", "member1-node-1")} {
		if err := cl.Create(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	want := 2 // the two above on static nodes, and via etcd the claims' own
	if viaEtcd {
		want += claims
	}
	attached, err := l.AttachStaticVolumes(ctx, "member1", want, 30*time.Second)
	if err != nil || attached != want {
		t.Errorf("attached %d, %v; want the %d of static nodes", attached, err, want)
	}
	for name, want := range map[string]bool{"va-0": true, "va-1": true, "va-lab": false} {
		v := &storagev1.VolumeAttachment{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, v); err != nil {
			t.Fatal(err)
		}
		if v.Status.Attached != want || hasString(v.Finalizers, attacherFinalizer) != want {
			t.Errorf("%s: attached %t, finalizers %v; want attached %t (the lab's attacher handles lab nodes)", name, v.Status.Attached, v.Finalizers, want)
		}
	}

	before := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: names[0]}, before); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	if err := Heartbeat(ctx, cl, names[0], at); err != nil {
		t.Fatal(err)
	}
	after := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: names[0]}, after); err != nil {
		t.Fatal(err)
	}
	if len(after.Status.Conditions) != len(before.Status.Conditions) {
		t.Fatalf("conditions %d -> %d", len(before.Status.Conditions), len(after.Status.Conditions))
	}
	for i, c := range after.Status.Conditions {
		b := before.Status.Conditions[i]
		if !c.LastHeartbeatTime.Time.Equal(at) || c.Status != b.Status || !c.LastTransitionTime.Equal(&b.LastTransitionTime) || c.Reason != b.Reason {
			t.Errorf("%s after a status report: %+v, before %+v; want only the heartbeat moved to %s", c.Type, c, b, at)
		}
	}
}

// The node monitor marks a lab node whose Lease stopped unreachable as the
// node-lifecycle controller does, clears the taints when the node is back,
// and never touches a static node.
func TestNodeMonitorMarksAStoppedLabNode(t *testing.T) {
	const grace = 2 * time.Second
	l, cl := envtestMember(t, Options{NoNodeLifecycle: true, NodeMonitorGracePeriod: grace})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	c := st.Cluster("member1")
	statics, err := l.AddStaticNodes(ctx, "member1", 1, true)
	if err != nil {
		t.Fatal(err)
	}
	// The lab node as kwok registers it: Ready, with a Lease.
	node := l.nodeObject(c, c.Nodes[0])
	status := staticNodeStatus(node.Status, "192.168.1.1", metav1.Now())
	node.Status = corev1.NodeStatus{}
	// What the API server's TaintNodesByCondition puts on a new Node.
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule})
	if err := cl.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status = status
	if err := cl.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: corev1.NamespaceNodeLease}}); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: node.Name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node.Name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &metav1.MicroTime{Time: time.Now()}}}
	if err := cl.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		t.Fatal(err)
	}
	onLab, onStatic := NewScalePod("bench", "on-lab", node.Name), NewScalePod("bench", "on-static", statics[0])
	for i, p := range []*corev1.Pod{onLab, onStatic} {
		if err := CreateStaticPod(ctx, cl, p, StaticPodIP(1, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Ready with a fresh Lease: the monitor admits it (the not-ready taint
	// goes, as the node-lifecycle controller removes it), so pods schedule.
	if err := l.monitorNodesOnce(ctx, st, c); err != nil {
		t.Fatal(err)
	}
	admitted := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: node.Name}, admitted); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(admitted.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady }) {
		t.Fatalf("a Ready lab node keeps the not-ready taint: %v", admitted.Spec.Taints)
	}
	staticBefore := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: statics[0]}, staticBefore); err != nil {
		t.Fatal(err)
	}

	// The Lease is not renewed: within the grace period plus a few passes
	// the node is Unknown and tainted.
	start := time.Now()
	err = pollUntil(ctx, grace+20*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := l.monitorNodesOnce(ctx, st, c); err != nil {
			return false, err
		}
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node.Name}, n); err != nil {
			return false, err
		}
		return NodeReadyStatus(n) == corev1.ConditionUnknown && hasUnreachableTaints(n.Spec.Taints), nil
	})
	if err != nil {
		t.Fatalf("the stopped node was not marked unreachable: %v", err)
	}
	if took := time.Since(start); took < grace {
		t.Errorf("marked after %s, before the grace period %s", took, grace)
	}
	n := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: node.Name}, n); err != nil {
		t.Fatal(err)
	}
	for _, cond := range n.Status.Conditions {
		if cond.Status != corev1.ConditionUnknown || cond.Reason != "NodeStatusUnknown" {
			t.Errorf("%s: %s/%s, want Unknown/NodeStatusUnknown", cond.Type, cond.Status, cond.Reason)
		}
	}
	for p, want := range map[*corev1.Pod]corev1.ConditionStatus{onLab: corev1.ConditionFalse, onStatic: corev1.ConditionTrue} {
		got := &corev1.Pod{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status != want {
				t.Errorf("pod %s on %s: Ready %s, want %s", got.Name, got.Spec.NodeName, c.Status, want)
			}
		}
	}

	// The kubelet is back: the Lease is renewed and the node reports Ready.
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := cl.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	n.Status = staticNodeStatus(n.Status, "192.168.1.1", metav1.Now())
	if err := cl.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	err = pollUntil(ctx, 20*time.Second, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := l.monitorNodesOnce(ctx, st, c); err != nil {
			return false, err
		}
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node.Name}, n); err != nil {
			return false, err
		}
		for _, tt := range n.Spec.Taints {
			if tt.Key == UnreachableTaint {
				return false, nil
			}
		}
		return NodeReadyStatus(n) == corev1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("the node back was not untainted: %v", err)
	}

	staticAfter := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: statics[0]}, staticAfter); err != nil {
		t.Fatal(err)
	}
	if staticAfter.ResourceVersion != staticBefore.ResourceVersion {
		t.Errorf("the node monitor wrote to static node %s", statics[0])
	}
}
