package rebalance

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/source"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// latencyWorkload is workload i's objects in a member: its Deployment, the
// current ReplicaSet and one Running pod on node.
func latencyWorkload(ns string, i int, member, node string) []client.Object {
	name := fmt.Sprintf("web-%d", i)
	d := types.UID(fmt.Sprintf("d-%s-%d", member, i))
	rs := types.UID(fmt.Sprintf("rs-%s-%d", member, i))
	sel := map[string]string{"app": name}
	return []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: d, Annotations: map[string]string{revisionAnnotation: "1"}},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-h", UID: rs, Labels: sel,
			Annotations: map[string]string{revisionAnnotation: "1"}, OwnerReferences: controllerRef("Deployment", name, d)}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-h-run", Labels: sel, OwnerReferences: controllerRef("ReplicaSet", name+"-h", rs)},
			Spec:   corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
	}
}

// unschedulablePod is workload i's new replica in member2, Unschedulable
// since since.
func unschedulablePod(ns string, i int, since time.Time) *corev1.Pod {
	name := fmt.Sprintf("web-%d", i)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-h-new", Labels: map[string]string{"app": name},
		OwnerReferences: controllerRef("ReplicaSet", name+"-h", types.UID(fmt.Sprintf("rs-member2-%d", i)))},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(since)}}}}
}

// shiftTimes records, from the host's watch, when each RSP's spec.clusters
// first changed.
type shiftTimes struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *shiftTimes) OnAdd(any, bool) {}
func (s *shiftTimes) OnDelete(any)    {}
func (s *shiftTimes) OnUpdate(oldObj, newObj any) {
	o, okO := oldObj.(*fedschedv1a1.ReplicaSchedulingPreference)
	n, okN := newObj.(*fedschedv1a1.ReplicaSchedulingPreference)
	if !okO || !okN || equality.Semantic.DeepEqual(o.Spec.Clusters, n.Spec.Clusters) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[n.Name]; !ok {
		s.at[n.Name] = time.Now()
	}
}

func (s *shiftTimes) get(name string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[name]
	return t, ok
}

// Decision latency through the real controller and its queue: exhaustion
// of several RSPs falls due while a fan-out over hundreds of other RSPs
// (a Node change, a member connecting: each pass with live member reads)
// fills the queue. The due passes are written within a second of the rule
// turning true, not after the fan-out drains: before, they were queued
// behind it (at the end of the queue, or at the initial list's low
// priority) and were written seconds late.
func TestDueExhaustionIsNotQueuedBehindAFanOut(t *testing.T) {
	const (
		due        = 8                     // RSPs whose exhaustion falls due
		background = 120                   // RSPs passed again by the fan-out
		liveRead   = 10 * time.Millisecond // per member read (Deployment, ReplicaSets)
		bound      = time.Second
	)
	spec := reactiveSpec()
	spec.CapacityExhaustedAfter = "3s"
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "latency"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	_, c, _, ns := onHost(t)
	pol.Spec.Rebalance.ReplicaSchedulingPreferences = v1alpha1.PodScope{Namespaces: []string{ns}}
	if err := c.Create(t.Context(), pol); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releasePolicy(c, pol) })

	total := due + background
	var m1, m2 []client.Object
	for i := range total {
		m1 = append(m1, latencyWorkload(ns, i, "member1", "n1")...)
		m2 = append(m2, latencyWorkload(ns, i, "member2", "n2")...)
		rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)},
			Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment", TotalReplicas: 4, Clusters: prefs(1, 1)}}
		if err := c.Create(t.Context(), rsp); err != nil {
			t.Fatal(err)
		}
	}
	fm := noMembers(t)
	fm.add(t, "member1", append(m1, readyNode("n1", 100000))...)
	fm.add(t, "member2", append(m2, readyNode("n2", int64(total)))...) // full
	fm.liveDelay = liveRead

	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(hostCfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{host: mgr.GetClient(), members: fm, recorder: events.NewFakeRecorder(100000), opts: Options{}.withDefaults(),
		now: time.Now, store: newStore(), mem: map[types.NamespacedName]*memory{}}
	kick := make(chan event.GenericEvent, total)
	if r.ctrl, err = ctrl.NewControllerManagedBy(mgr).Named("rebalance-latency").For(&fedschedv1a1.ReplicaSchedulingPreference{}).
		WatchesRawSource(source.Channel(kick, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4, SkipNameValidation: ptr.To(true)}).Build(r); err != nil {
		t.Fatal(err)
	}
	shifts := &shiftTimes{at: map[string]time.Time{}}
	inf, err := mgr.GetCache().GetInformer(t.Context(), &fedschedv1a1.ReplicaSchedulingPreference{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandler(shifts)); err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)

	// The manager's initial list passes every RSP once (first touch).
	pollUntil(t, 2*time.Minute, "every RSP taken over", func() (bool, string) {
		var list v1alpha1.RebalanceRecordList
		if err := c.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		n := len(list.Items)
		return n == total, fmt.Sprintf("%d/%d recorded", n, total)
	})

	// The first `due` workloads' new replicas turn Unschedulable in member2
	// (the pod events pass their RSPs); capacityExhaustedAfter later they
	// are due, just after a fan-out over the others was queued.
	// fedfailover counts from its first sighting, just after since: timed
	// from since, the figures include that sighting's delay.
	since := time.Now()
	dueAt := since.Add(spec.CapacityExhaustedAfter.Get())
	for i := range due {
		if err := fm.readers["member2"].Create(t.Context(), unschedulablePod(ns, i, since)); err != nil {
			t.Fatal(err)
		}
		kick <- event.GenericEvent{Object: &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}}}
	}
	fanOut := time.AfterFunc(time.Until(dueAt.Add(-300*time.Millisecond)), func() {
		for i := due; i < total; i++ {
			kick <- event.GenericEvent{Object: &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i)}}}
		}
	})
	defer fanOut.Stop()

	var lat []time.Duration
	pollUntil(t, time.Until(dueAt.Add(time.Minute)), "every due RSP shifted", func() (bool, string) {
		lat = lat[:0]
		for i := range due {
			at, ok := shifts.get(fmt.Sprintf("web-%d", i))
			if !ok {
				return false, fmt.Sprintf("%d/%d shifted", len(lat), due)
			}
			lat = append(lat, at.Sub(dueAt))
		}
		return true, ""
	})
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("rule true -> RSP written: min %s, median %s, max %s (%d RSPs due, fan-out over %d)", lat[0], lat[len(lat)/2], lat[len(lat)-1], due, background)
	if lat[0] < 0 {
		t.Errorf("an RSP was shifted %s before its exhaustion was due", -lat[0])
	}
	if worst := lat[len(lat)-1]; worst > bound {
		t.Errorf("the last due RSP was written %s after the rule turned true, want within %s", worst, bound)
	}
}

// releasePolicy deletes pol without waiting for its finalizer.
func releasePolicy(c client.Client, pol *v1alpha1.FailoverPolicy) {
	ctx := context.Background()
	got := &v1alpha1.FailoverPolicy{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pol), got); err != nil {
		return
	}
	orig := got.DeepCopy()
	got.Finalizers = nil
	_ = c.Patch(ctx, got, client.MergeFrom(orig))
	_ = c.Delete(ctx, got)
}

// runManager starts mgr until the test ends, and fails the test if it
// stops with an error.
func runManager(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	testenv.RunManager(t, ctx, cancel, mgr)
}

// pollUntil calls cond every 20 ms until it holds or timeout passes.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s", timeout, what, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// memberOutOfRoom is a rebalancing policy's RSP over two members: member1
// runs the workload's pod with room for more, member2's pod is
// Unschedulable since t0 on member2's clock.
func memberOutOfRoom(t *testing.T, policy string) (*Reconciler, client.Client, types.NamespacedName) {
	t.Helper()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: ptr.To(reactiveSpec())}}
	r, c, _, key := rspWithAnnotation(t, "", pol)
	deploy := func() []client.Object {
		return []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "d-web",
			Annotations: map[string]string{revisionAnnotation: "1"}}}, replicaSet("web-1", "rs-1", "1", "d-web")}
	}
	fm := noMembers(t)
	fm.add(t, "member1", append(deploy(), readyNode("n1", 20), podOf("p1", "rs-1", true))...)
	fm.add(t, "member2", append(deploy(), podOf("p2", "rs-1", false))...)
	r.members, r.opts = fm, Options{}.withDefaults()
	return r, c, key
}

// The pass that first sees pods Unschedulable wakes the RSP exactly when
// capacityExhaustedAfter ends, counted from that sighting on the host's clock, however long the pass takes: its wait is
// counted from the clock when it returns (the queue counts RequeueAfter
// from there). Before, it came late by the pass's own length.
func TestExhaustionWakeUpIsWhenTheRuleTurnsTrue(t *testing.T) {
	r, c, key := memberOutOfRoom(t, "wake")
	clock := t0.Add(time.Second)
	r.now = func() time.Time { clock = clock.Add(50 * time.Millisecond); return clock } // every reading 50 ms later
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	seen := recordedState(t, c, key).Members["member2"].UnschedulableSince
	if seen == nil || seen.Before(&metav1.MicroTime{Time: t0.Add(time.Second)}) {
		t.Fatalf("Unschedulable first seen at %v, want this pass's reading of the host clock", seen)
	}
	due := seen.Add(testSpec().CapacityExhaustedAfter.Get())
	if wake := clock.Add(res.RequeueAfter); !wake.Equal(due) {
		t.Errorf("wakes at %s, %s after the exhaustion rule turns true (%s)", wake.Format("15:04:05.000"), wake.Sub(due), due.Format("15:04:05.000"))
	}
	if res.Priority == nil || *res.Priority != duePriority {
		t.Errorf("priority %v, want %d: the pass is due at a transition", ptr.Deref(res.Priority, 0), duePriority)
	}
}

// TestOldMemberTimestampIsNotExhaustion: a pod Unschedulable since an hour
// ago on the member's clock (a member clock behind the host's reads the
// same) is not exhaustion on fedfailover's first sighting; the member is
// exhausted only capacityExhaustedAfter later on the host's clock. Counting
// from the member's timestamp shifted the RSP on the first pass.
func TestOldMemberTimestampIsNotExhaustion(t *testing.T) {
	r, c, key := memberOutOfRoom(t, "clock")
	clock := t0.Add(time.Hour)
	r.now = func() time.Time { return clock }
	baseline := specOf(t, c, key).Spec.Clusters

	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if got := specOf(t, c, key).Spec.Clusters; !equality.Semantic.DeepEqual(got, baseline) {
		t.Fatalf("first sighting of a pod Unschedulable for an hour on the member's clock shifted the RSP: %v", got)
	}
	clock = clock.Add(testSpec().CapacityExhaustedAfter.Get() + time.Second)
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	if got := specOf(t, c, key).Spec.Clusters; equality.Semantic.DeepEqual(got, baseline) {
		t.Fatalf("capacityExhaustedAfter after fedfailover first saw it, member2 is still not exhausted: %v", got)
	}
}
