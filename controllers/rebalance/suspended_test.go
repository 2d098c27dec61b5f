package rebalance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
)

// readyNode is a Ready member node with room for pods pods.
func readyNode(name string, pods int64) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(pods, resource.DecimalSI),
				corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// passAt reconciles key with the clock at t.
func passAt(t *testing.T, r *Reconciler, key types.NamespacedName, at time.Time) {
	t.Helper()
	r.now = func() time.Time { return at }
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
}

// drain returns the events recorded so far.
func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func countPrefix(evs []string, prefix string) int {
	n := 0
	for _, ev := range evs {
		if strings.HasPrefix(ev, prefix) {
			n++
		}
	}
	return n
}

// Rule 1, visible: while the federation guard holds an RSP, the policy
// says so (RebalanceSuspended, naming the members), the gauge is 1 and one
// event marks the start; one more marks the end.
func TestGuardSuspensionIsVisible(t *testing.T) {
	spec := testSpec()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	user := (&contract.RebalanceState{Policy: "guarded", Baseline: contract.Placement{TotalReplicas: 6, Clusters: prefs(1, 1)}})
	user.Applied = &user.Baseline
	r, c, rec, key := rspWithState(t, user, pol)
	fm := noMembers(t)
	fm.add(t, "member1", readyNode("n1", 10))
	fm.add(t, "member2", readyNode("n2", 10))
	fm.kill("member1", "member2")
	r.members = fm
	gauge := func() float64 {
		return testutil.ToFloat64(metrics.RebalanceSuspended.WithLabelValues("guarded", v1alpha1.ReasonTooManyMembersFailed))
	}

	for i := range 4 { // failing at t0, failed from t0+10s on
		passAt(t, r, key, t0.Add(time.Duration(i)*6*time.Second))
	}
	cond := suspendedOf(t, r, pol)
	if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonTooManyMembersFailed ||
		!strings.Contains(cond.Message, "member1, member2") || !strings.Contains(cond.Message, "demo/web") {
		t.Errorf("condition %+v, want True TooManyMembersFailed naming demo/web and both members", cond)
	}
	if gauge() != 1 {
		t.Errorf("fedfailover_rebalance_suspended = %v, want 1", gauge())
	}
	evs := drain(rec.Events)
	if n := countPrefix(evs, "Warning "+v1alpha1.ReasonTooManyMembersFailed+" "); n != 2 { // on the RSP and the policy, once
		t.Errorf("%d suspension events, want 2: %v", n, evs)
	}
	if got := &specOf(t, c, key).Spec; got.TotalReplicas != 6 || !contract.EqualPreferences(got.Clusters, prefs(1, 1)) {
		t.Errorf("spec %+v changed under the guard", got)
	}

	fm.revive("member1", "member2")
	passAt(t, r, key, t0.Add(time.Minute))
	passAt(t, r, key, t0.Add(time.Minute+time.Second))
	if cond := suspendedOf(t, r, pol); cond.Status != metav1.ConditionFalse || cond.Reason != v1alpha1.ReasonNotSuspended {
		t.Errorf("after recovery: condition %+v, want False NotSuspended", cond)
	}
	if gauge() != 0 {
		t.Errorf("after recovery: fedfailover_rebalance_suspended = %v, want 0", gauge())
	}
	if evs := drain(rec.Events); countPrefix(evs, "Normal "+ReasonRebalanceResumed+" ") != 2 {
		t.Errorf("want one resume event on the RSP and one on the policy: %v", evs)
	}
}

// Rule 1, visible: no room anywhere is a suspension too, naming the
// members without room.
func TestNoCapacitySuspensionIsVisible(t *testing.T) {
	spec := testSpec()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "full"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	r, _, _, key := rspWithAnnotation(t, "", pol)
	fm := noMembers(t)
	fm.add(t, "member1") // no nodes: no room
	fm.add(t, "member2")
	r.members = fm
	passAt(t, r, key, t0)
	cond := suspendedOf(t, r, pol)
	if cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ReasonNoCapacityAnywhere || !strings.Contains(cond.Message, "no room in member1, member2") {
		t.Errorf("condition %+v, want True NoCapacityAnywhere naming both members", cond)
	}
	if v := testutil.ToFloat64(metrics.RebalanceSuspended.WithLabelValues("full", v1alpha1.ReasonNoCapacityAnywhere)); v != 1 {
		t.Errorf("fedfailover_rebalance_suspended{reason=NoCapacityAnywhere} = %v, want 1", v)
	}
}

func suspendedOf(t *testing.T, r *Reconciler, pol *v1alpha1.FailoverPolicy) metav1.Condition {
	t.Helper()
	entries, _ := r.store.Snapshot(pol.Name)
	st := desiredStatus(pol, entries)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRebalanceSuspended)
	if c == nil {
		t.Fatalf("no %s condition in %+v", v1alpha1.ConditionRebalanceSuspended, st.Conditions)
	}
	return *c
}
