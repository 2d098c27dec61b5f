package member

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/capacity"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// The readers of cached Pods and Nodes (controllers/rebalance,
// controllers/noderecovery, internal/capacity, internal/fencing) must get
// the same answers from a transformed object as from the original. The
// answers below mirror what each reader reads; keep them in step.

// podAnswers is everything a decision reads of a Pod.
type podAnswers struct {
	Key             string
	UID             types.UID
	NodeName        string
	Phase           corev1.PodPhase
	Deleting        bool
	Ready           bool     // rebalance runningPods, noderecovery podReady
	Unschedulable   bool     // rebalance anyUnschedulable (never since when)
	ScheduledReason string   // rebalance podChanged
	Claims          []string // noderecovery podClaims
	DaemonSet       bool     // noderecovery ownedByDaemonSet
	Selected        []bool   // workload selectors and pod scopes
	Requests        map[corev1.ResourceName]string
}

var testSelectors = []string{"app=svc-1", "app.kubernetes.io/part-of=shop,pod-template-hash", "tier notin (cache)", "app in (db,web)", ""}

func answersOf(t *testing.T, p *corev1.Pod) podAnswers {
	t.Helper()
	a := podAnswers{Key: p.Namespace + "/" + p.Name, UID: p.UID, NodeName: p.Spec.NodeName, Phase: p.Status.Phase,
		Deleting: p.DeletionTimestamp != nil, Requests: map[corev1.ResourceName]string{}}
	for _, c := range p.Status.Conditions {
		switch {
		case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
			a.Ready = true
		case c.Type == corev1.PodScheduled:
			a.ScheduledReason = string(c.Status) + c.Reason
			if c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				a.Unschedulable = true
			}
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			a.Claims = append(a.Claims, p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			a.Claims = append(a.Claims, p.Namespace+"/"+p.Name+"-"+v.Name)
		}
	}
	a.DaemonSet = slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
	for _, s := range testSelectors {
		sel, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		a.Selected = append(a.Selected, sel.Matches(labels.Set(p.Labels)))
	}
	for name, q := range capacity.PodRequests(&p.Spec) {
		a.Requests[name] = q.String()
	}
	return a
}

// cachedAnswers is answersOf for the pod a member cache keeps: each of its
// fields in the place of the typed Pod's field it keeps.
func cachedAnswers(t *testing.T, p *cachedpod.Pod) podAnswers {
	t.Helper()
	return answersOf(t, &corev1.Pod{ObjectMeta: p.ObjectMeta,
		Spec:   corev1.PodSpec{NodeName: p.NodeName, Volumes: p.Volumes, Resources: p.Requests},
		Status: corev1.PodStatus{Phase: p.Phase, Conditions: p.Conditions}})
}

// testPods covers the pod shapes decisions distinguish.
func testPods() []*corev1.Pod {
	rl := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	var pods []*corev1.Pod
	add := func(f func(p *corev1.Pod)) {
		p := deploymentPod(len(pods) * 37)
		f(p)
		pods = append(pods, p)
	}
	add(func(*corev1.Pod) {}) // Running, Ready, two containers, a PVC
	add(func(p *corev1.Pod) { // Pending, Unschedulable
		p.Spec.NodeName = ""
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available",
			LastTransitionTime: metav1.NewTime(memEpoch.Add(time.Minute))}}}
	})
	add(func(p *corev1.Pod) { // terminating, not Ready
		p.DeletionTimestamp = ptr.To(metav1.NewTime(memEpoch.Add(time.Hour)))
		p.Status.Conditions[2].Status = corev1.ConditionFalse
	})
	add(func(p *corev1.Pod) { // DaemonSet pod, no volumes
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "node-agent", UID: "ds-1", Controller: ptr.To(true)}}
		p.Spec.Volumes = nil
	})
	add(func(p *corev1.Pod) { // StatefulSet pod with an ephemeral volume and a per-pod claim
		p.Labels = map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": p.Name, "apps.kubernetes.io/pod-index": "3"}
		p.Spec.Volumes = []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + p.Name}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
				VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}},
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		}
	})
	add(func(p *corev1.Pod) { // init containers larger than the app, a sidecar, overhead
		p.Spec.InitContainers = []corev1.Container{
			{Name: "migrate", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "1Gi")}},
			{Name: "proxy", RestartPolicy: always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "32Mi")}},
			{Name: "warm", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1500m", "nvidia.com/gpu", "1")}},
		}
		p.Spec.Overhead = rl("cpu", "50m", "memory", "20Mi")
	})
	add(func(p *corev1.Pod) { // pod-level requests for one resource
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "3"), Limits: rl("cpu", "4")}
	})
	add(func(p *corev1.Pod) { // no requests at all, Succeeded
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].Resources = corev1.ResourceRequirements{}
		}
		p.Status.Phase = corev1.PodSucceeded
	})
	add(func(p *corev1.Pod) { // odd quantities: decimal, exponent, huge
		p.Spec.Containers[0].Resources.Requests = rl("cpu", "0.1", "memory", "1e9", "example.com/dongle", "100000000000000000000")
		p.Status.Conditions = nil
	})
	add(func(p *corev1.Pod) { // Failed, evicted
		p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
	})
	return pods
}

func transformedPod(t *testing.T, p *corev1.Pod) *cachedpod.Pod {
	t.Helper()
	out, err := transformPod(p.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*cachedpod.Pod)
}

func TestTransformPodKeepsWhatDecisionsUse(t *testing.T) {
	for i, in := range testPods() {
		got := transformedPod(t, in)
		if want, have := answersOf(t, in), cachedAnswers(t, got); !reflect.DeepEqual(want, have) {
			t.Errorf("pod %d: decisions read\n%+v\nfrom the transformed pod, want\n%+v", i, have, want)
		}
		if !equality.Semantic.DeepEqual(got.Labels, in.Labels) || !equality.Semantic.DeepEqual(got.OwnerReferences, in.OwnerReferences) {
			t.Errorf("pod %d: labels or owners changed: %v %v", i, got.Labels, got.OwnerReferences)
		}
		if got.ResourceVersion != in.ResourceVersion || !got.CreationTimestamp.Equal(&in.CreationTimestamp) {
			t.Errorf("pod %d: metadata changed: %+v", i, got.ObjectMeta)
		}
		// A transformed pod passes a second transform untouched (the
		// informer may transform an object it holds again).
		if again, err := transformPod(got); err != nil || again != any(got) {
			t.Errorf("pod %d: a transformed pod transformed again: %v %v", i, again, err)
		}
		// What the event handlers and the tests' fakes receive is a copy
		// with the same answers.
		if cp := got.DeepCopyObject().(*cachedpod.Pod); !reflect.DeepEqual(cachedAnswers(t, cp), cachedAnswers(t, got)) || !equality.Semantic.DeepEqual(cp, got) {
			t.Errorf("pod %d: DeepCopyObject differs:\n%+v\n%+v", i, cp, got)
		}
	}
}

func TestTransformPodDropsWhatNoDecisionReads(t *testing.T) {
	in := deploymentPod(0)
	in.Annotations[lastApplied] = "{big}"
	in.Finalizers = []string{"example.com/hold"}
	p := transformedPod(t, in)
	switch {
	case p.ManagedFields != nil, p.Annotations != nil, p.GenerateName != "":
		t.Errorf("metadata kept: %+v", p.ObjectMeta)
	case !slices.Equal(p.Finalizers, in.Finalizers):
		// Node recovery waits for a deleting pod a finalizer holds instead
		// of deleting it again every pass.
		t.Errorf("finalizers %v, want %v kept", p.Finalizers, in.Finalizers)
	case p.Requests == nil || p.Requests.Limits != nil:
		t.Errorf("requests = %+v, want the requests only", p.Requests)
	case len(p.Volumes) != 1 || p.Volumes[0].PersistentVolumeClaim.ClaimName != in.Spec.Volumes[0].PersistentVolumeClaim.ClaimName:
		t.Errorf("volumes = %+v, want the PVC only", p.Volumes)
	case len(p.Conditions) != 2 || p.Conditions[0].Type != corev1.PodReady || p.Conditions[1].Type != corev1.PodScheduled ||
		p.Conditions[1].Message != "" || !p.Conditions[0].LastTransitionTime.IsZero():
		// No decision reads a pod condition's time (a member clock's).
		t.Errorf("conditions = %+v, want Ready and PodScheduled without messages nor times", p.Conditions)
	}
	// The whole point of the type: a cached pod is a 352-byte struct, where
	// a corev1.Pod is 1,280 bytes whatever it holds.
	if size := unsafe.Sizeof(cachedpod.Pod{}); size > 352 {
		t.Errorf("a cached pod is %d bytes, want at most 352", size)
	}
	// Tombstones pass through untouched.
	if out, _ := transformPod("tombstone"); out != "tombstone" {
		t.Error("non-pod not passed through")
	}
}

// The requests of a cached pod are its effective requests: capacity must
// estimate the same room from transformed Nodes and Pods.
func TestTransformKeepsCapacityEstimates(t *testing.T) {
	var nodes, tnodes []corev1.Node
	for i := range 6 {
		n := memberNode(i)
		switch i {
		case 1:
			n.Status.Conditions[3].Status = corev1.ConditionUnknown
		case 2:
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
		case 3:
			n.Spec.Unschedulable = true
		case 4:
			n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("2")
		}
		out, err := transformNode(n.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		nodes, tnodes = append(nodes, *n), append(tnodes, *out.(*corev1.Node))
	}
	var pods []corev1.Pod
	usage := capacity.NewUsage()
	for i, p := range testPods() {
		for j := range 3 {
			p := p.DeepCopy()
			p.Name = fmt.Sprintf("%s-%d", p.Name, j)
			if p.Spec.NodeName != "" {
				p.Spec.NodeName = nodes[(i+j)%len(nodes)].Name
			}
			tp := transformedPod(t, p)
			if want, got := capacity.PodRequests(&p.Spec), tp.RequestList(); !equalList(want, got) {
				t.Errorf("pod %s: requests %v, want %v", p.Name, got, want)
			}
			pods = append(pods, *p)
			usage.Add(tp)
		}
	}
	tptrs := make([]*corev1.Node, len(tnodes))
	for i := range tnodes {
		tptrs[i] = &tnodes[i]
	}
	for _, tmpl := range []*corev1.PodSpec{
		{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			NodeSelector: map[string]string{"topology.kubernetes.io/zone": "eu-west-1b"}},
		{},
	} {
		want, got := capacity.Fit(nodes, pods, tmpl), usage.Fit(tptrs, tmpl)
		if want.Replicas != got.Replicas || want.EligibleNodes != got.EligibleNodes || !reflect.DeepEqual(want.Ineligible, got.Ineligible) ||
			!equalList(want.Free, got.Free) {
			t.Errorf("Fit from transformed objects = %+v, want %+v", got, want)
		}
	}
}

func transformedNode(t *testing.T, n *corev1.Node) *corev1.Node {
	t.Helper()
	out, err := transformNode(n.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Node)
}

func TestTransformNodeKeepsWhatDecisionsUse(t *testing.T) {
	now := memEpoch.Add(2 * time.Hour)
	for i, mod := range []func(*corev1.Node){
		func(*corev1.Node) {},
		func(n *corev1.Node) { // lost, marked, tainted by us, being deleted
			n.Status.Conditions[3].Status, n.Status.Conditions[3].LastTransitionTime = corev1.ConditionUnknown, metav1.NewTime(now.Add(-5*time.Minute))
			maps.Copy(n.Annotations, contract.NodeMarks{LostSince: now.Add(-5 * time.Minute)}.Annotations())
			n.Annotations[lastApplied] = "{big}"
			n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute,
				TimeAdded: ptr.To(metav1.NewTime(now))}}
			n.Spec.Unschedulable = true
			n.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		},
		func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:3] }, // no Ready condition
	} {
		in := memberNode(i)
		mod(in)
		got := transformedNode(t, in)
		wantAnn := in.DeepCopy().Annotations
		delete(wantAnn, lastApplied)
		switch {
		case got.Name != in.Name, got.UID != in.UID, got.ResourceVersion != in.ResourceVersion,
			!got.DeletionTimestamp.Equal(in.DeletionTimestamp):
			t.Errorf("node %d: metadata %+v", i, got.ObjectMeta)
		case !reflect.DeepEqual(got.Labels, in.Labels), !reflect.DeepEqual(got.Annotations, wantAnn):
			t.Errorf("node %d: labels %v, annotations %v", i, got.Labels, got.Annotations)
		case !equality.Semantic.DeepEqual(got.Spec.Taints, in.Spec.Taints), got.Spec.Unschedulable != in.Spec.Unschedulable,
			got.Spec.ProviderID != in.Spec.ProviderID:
			t.Errorf("node %d: spec %+v", i, got.Spec)
		case !equality.Semantic.DeepEqual(got.Status.Allocatable, in.Status.Allocatable):
			t.Errorf("node %d: allocatable %v", i, got.Status.Allocatable)
		case nodecond.IsReady(got) != nodecond.IsReady(in), !fencing.NotReadySince(got).Equal(fencing.NotReadySince(in)):
			t.Errorf("node %d: readiness %+v", i, got.Status.Conditions)
		case readyOf(got) != readyOf(in):
			t.Errorf("node %d: Ready condition %q, want %q", i, readyOf(got), readyOf(in))
		case !fencing.NewestMemberTime(got).Equal(fencing.NewestMemberTime(in)):
			t.Errorf("node %d: newest member time %s, want %s", i, fencing.NewestMemberTime(got), fencing.NewestMemberTime(in))
		}
		for _, d := range []time.Duration{time.Minute, 10 * time.Minute} {
			wl, ws := fencing.Lost(in, d, now)
			gl, gs := fencing.Lost(got, d, now)
			if wl != gl || !ws.Equal(gs) {
				t.Errorf("node %d: Lost(%s) = %v %v, want %v %v", i, d, gl, gs, wl, ws)
			}
		}
		if got.Status.Images != nil || got.Status.Capacity != nil || got.Status.Addresses != nil ||
			got.Status.NodeInfo != (corev1.NodeSystemInfo{}) || len(got.ManagedFields) > 1 ||
			(len(got.ManagedFields) == 1 && got.ManagedFields[0].FieldsV1 != nil) {
			t.Errorf("node %d: dropped fields kept: %+v", i, got)
		}
		if again := transformedNode(t, got); !equality.Semantic.DeepEqual(again, got) {
			t.Errorf("node %d: transform not idempotent", i)
		}
	}
}

// readyOf is what noderecovery's node predicate compares.
func readyOf(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return string(c.Status) + c.LastTransitionTime.String()
		}
	}
	return ""
}

func TestTransformSharesRepeatedValues(t *testing.T) {
	// Pods 0 and 1 belong to one ReplicaSet, pod 100 to another.
	a, b, c := transformedPod(t, deploymentPod(0)), transformedPod(t, deploymentPod(1)), transformedPod(t, deploymentPod(100))
	same := func(x, y any) bool { return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer() }
	if !same(a.Labels, b.Labels) || !same(a.OwnerReferences, b.OwnerReferences) || a.Requests != b.Requests ||
		!same(a.Volumes, b.Volumes) {
		t.Error("pods of one ReplicaSet do not share labels, owners, requests and volumes")
	}
	if same(a.Labels, c.Labels) || same(a.OwnerReferences, c.OwnerReferences) {
		t.Error("pods of different ReplicaSets share labels or owners")
	}
	// Ready and scheduled pods share their conditions (no times are kept).
	if !same(a.Conditions, c.Conditions) {
		t.Error("equal pod conditions are not shared")
	}
	if a.Requests != c.Requests {
		t.Error("equal requests of different workloads are not shared")
	}
	if a.Namespace != b.Namespace || unsafeData(a.Namespace) != unsafeData(b.Namespace) {
		t.Error("namespace not shared")
	}
	// A deep copy (what cached reads return by default) shares nothing.
	cp := a.DeepCopyObject().(*cachedpod.Pod)
	cp.Labels["app"] = "changed"
	if b.Labels["app"] == "changed" {
		t.Error("a deep copy shares the label map")
	}
	// Unequal values with one hash: the second keeps its own.
	var tb table[[]string]
	eq := func(x, y []string) bool { return slices.Equal(x, y) }
	own := func(v []string) []string { return slices.Clone(v) }
	x := tb.get(7, []string{"x"}, eq, own)
	if y := tb.get(7, []string{"y"}, eq, own); y[0] != "y" || !same(tb.get(7, []string{"x"}, eq, own), x) {
		t.Errorf("collision: got %v", y)
	}
	// Tables are bounded.
	for i := range maxSharedValues + 10 {
		tb.get(uint64(i), []string{"v"}, eq, own)
	}
	if len(tb.m) > maxSharedValues {
		t.Errorf("table holds %d values, max %d", len(tb.m), maxSharedValues)
	}
}

// The equalities decide what is shared when two values have one hash: each
// field they compare must tell values apart.
func TestSharedEqualities(t *testing.T) {
	pvc := func(name, claim string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
	}
	eph := corev1.Volume{Name: "a", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}
	vols := []corev1.Volume{pvc("a", "c1")}
	for _, other := range [][]corev1.Volume{{pvc("b", "c1")}, {pvc("a", "c2")}, {eph}, {pvc("a", "c1"), pvc("b", "c1")}, nil} {
		if equalVolumes(vols, other) {
			t.Errorf("volumes %v equal %v", vols, other)
		}
	}
	if !equalVolumes(vols, []corev1.Volume{pvc("a", "c1")}) || !equalVolumes([]corev1.Volume{eph}, []corev1.Volume{eph}) {
		t.Error("equal volumes differ")
	}

	own := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}
	for _, mod := range []func(*metav1.OwnerReference){
		func(o *metav1.OwnerReference) { o.APIVersion = "v1" },
		func(o *metav1.OwnerReference) { o.Kind = "DaemonSet" },
		func(o *metav1.OwnerReference) { o.Name = "other" },
		func(o *metav1.OwnerReference) { o.UID = "v" },
		func(o *metav1.OwnerReference) { o.Controller = ptr.To(false) },
		func(o *metav1.OwnerReference) { o.Controller = nil },
		func(o *metav1.OwnerReference) { o.BlockOwnerDeletion = ptr.To(true) },
	} {
		other := own
		mod(&other)
		if equalOwners([]metav1.OwnerReference{own}, []metav1.OwnerReference{other}) {
			t.Errorf("owner %+v equals %+v", other, own)
		}
	}
	if !equalOwners([]metav1.OwnerReference{own}, []metav1.OwnerReference{*own.DeepCopy()}) {
		t.Error("equal owners differ")
	}

	q := resource.MustParse
	cpu := corev1.ResourceList{corev1.ResourceCPU: q("1")}
	for _, other := range []corev1.ResourceList{
		{corev1.ResourceCPU: q("1001m")},
		{corev1.ResourceMemory: q("1")},
		{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1")},
		{corev1.ResourceCPU: *resource.NewQuantity(1, resource.BinarySI)}, // prints differently
		{},
	} {
		if equalList(cpu, other) {
			t.Errorf("list %v equals %v", other, cpu)
		}
	}
	if !equalList(cpu, corev1.ResourceList{corev1.ResourceCPU: q("1000m")}) {
		t.Error("1000m and 1 CPU differ")
	}
}

func unsafeData(s string) *byte { return unsafe.StringData(s) }

// Informers of every member transform at once (run with -race).
func TestTransformConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				if _, err := transformPod(deploymentPod(g*1000 + i)); err != nil {
					t.Error(err)
				}
				if _, err := transformNode(memberNode(i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

func TestReasonAndRedact(t *testing.T) {
	if got := redact("bad token abc123 here", "abc123"); got != "bad token [REDACTED] here" {
		t.Errorf("redact = %q", got)
	}
	if !disconnectNow(ReasonUnauthorized) || !disconnectNow(ReasonForbidden) || disconnectNow(ReasonUnreachable) {
		t.Error("disconnectNow wrong")
	}
}
