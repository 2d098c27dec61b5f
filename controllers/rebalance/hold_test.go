package rebalance

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// An RSP shifted by a policy whose selector became invalid stays exactly as
// it is (no release mid-failover), the policy's status says why, and the
// event is emitted once.
// shiftedRSP is an RSP that policy p shifted from the user's 1:1 to 6:0, in
// a fake host with pol, and a reconciler over it.
func shiftedRSP(t *testing.T, pol *v1alpha1.FailoverPolicy) (r *Reconciler, c client.Client, rec *events.FakeRecorder,
	rsp *fedschedv1a1.ReplicaSchedulingPreference, m *contract.RebalanceState, shifted contract.Placement) {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	user := contract.Placement{TotalReplicas: 6, Clusters: prefs(1, 1)}
	shifted = contract.Placement{TotalReplicas: 6, Clusters: prefs(6, 0)}
	m = &contract.RebalanceState{Policy: "p", Baseline: user, Applied: &shifted, LastChange: timePtr(t0)}
	rsp = &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: fedschedv1a1.ReplicaSchedulingPreferenceSpec{TargetKind: "FederatedDeployment", TotalReplicas: 6, Clusters: prefs(6, 0)}}
	c = fake.NewClientBuilder().WithScheme(s).WithObjects(rsp, pol).Build()
	rec = events.NewFakeRecorder(10)
	r = &Reconciler{host: c, recorder: rec, store: newStore(), mem: map[types.NamespacedName]*memory{}, now: func() time.Time { return t0 }}
	putRecord(t, c, client.ObjectKeyFromObject(rsp), m)
	return r, c, rec, rsp, m, shifted
}

// reconcileUnchanged reconciles the RSP passes times and fails unless it is
// exactly as it was: not written, still shifted, same recorded state.
func reconcileUnchanged(t *testing.T, r *Reconciler, c client.Client, rsp *fedschedv1a1.ReplicaSchedulingPreference,
	m *contract.RebalanceState, shifted contract.Placement, passes int) {
	t.Helper()
	key := client.ObjectKeyFromObject(rsp)
	before := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := c.Get(context.Background(), key, before); err != nil {
		t.Fatal(err)
	}
	recBefore := recordOf(t, c, key)
	for range passes {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
	}
	got := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := c.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != before.ResourceVersion || !specPlacement(got).Equal(shifted) {
		t.Fatalf("RSP changed: %+v", got)
	}
	if rec := recordOf(t, c, key); rec.ResourceVersion != recBefore.ResourceVersion || !contract.StateFromRecord(&rec.Spec).Baseline.Equal(m.Baseline) {
		t.Fatalf("record changed: %+v", rec.Spec)
	}
}

func TestInvalidSelectorHoldsShiftedRSP(t *testing.T) {
	spec := testSpec()
	spec.ReplicaSchedulingPreferences.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	r, c, rec, rsp, m, shifted := shiftedRSP(t, pol)

	reconcileUnchanged(t, r, c, rsp, m, shifted, 2)
	if n := len(rec.Events); n != 2 { // one on the RSP, one on the policy
		t.Fatalf("%d events, want 2 (once)", n)
	}
	if ev := <-rec.Events; !strings.Contains(ev, v1alpha1.ReasonInvalidSelector) || !strings.Contains(ev, "spec.rebalance.replicaSchedulingPreferences.selector") {
		t.Errorf("event %q", ev)
	}
	entries, decisions := r.store.Snapshot("p")
	st := desiredStatus(pol, entries)
	if len(st.Rebalances) != 1 || !st.Rebalances[0].Shifted || st.Rebalances[0].Reason != v1alpha1.ReasonInvalidSelector {
		t.Errorf("rebalances %+v", st.Rebalances)
	}
	if len(st.Conditions) != 3 || st.Conditions[0].Reason != v1alpha1.ReasonRebalanceHeld || !strings.Contains(st.Conditions[0].Message, "demo/web") {
		t.Errorf("conditions %+v", st.Conditions)
	}
	// Not assessed while held: N+1 readiness is not known.
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFailoverReady); c == nil || c.Status != metav1.ConditionUnknown ||
		c.Reason != v1alpha1.ReasonReadinessUnknown || !strings.Contains(c.Message, "held, not assessed: demo/web") {
		t.Errorf("FailoverReady %+v, want Unknown naming demo/web held", c)
	}
	if len(st.FailoverReadiness) != 0 {
		t.Errorf("failoverReadiness %+v of a held RSP", st.FailoverReadiness)
	}
	if len(decisions) != 1 || decisions[0].Action != ActionHold {
		t.Errorf("decisions %+v", decisions)
	}
}

// A paused policy leaves its shifted RSP exactly as it is (neither planned
// nor released), whatever its members do, and says so.
func TestPausedPolicyWritesNothing(t *testing.T) {
	spec := testSpec()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec, Paused: true}}
	r, c, _, rsp, m, shifted := shiftedRSP(t, pol)
	reconcileUnchanged(t, r, c, rsp, m, shifted, 1)
	entries, _ := r.store.Snapshot("p")
	if st := desiredStatus(pol, entries); len(st.Rebalances) != 1 || st.Rebalances[0].Reason != v1alpha1.ReasonPaused {
		t.Errorf("rebalances %+v, want the RSP listed as Paused", st.Rebalances)
	}
}

// A sharded manager sees only the members its replica holds: it plans
// nothing on that partial view. The RSP is held as it is, the policy says
// why (naming --shard), once.
func TestShardedManagerHoldsRebalance(t *testing.T) {
	spec := testSpec()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	r, c, rec, rsp, m, shifted := shiftedRSP(t, pol)
	r.opts.Sharded = true
	reconcileUnchanged(t, r, c, rsp, m, shifted, 2)
	if n := len(rec.Events); n != 2 { // one on the RSP, one on the policy
		t.Fatalf("%d events, want 2 (once)", n)
	}
	if ev := <-rec.Events; !strings.Contains(ev, v1alpha1.ReasonShardedRebalance) || !strings.Contains(ev, "--shard") {
		t.Errorf("event %q, want reason %s naming --shard", ev, v1alpha1.ReasonShardedRebalance)
	}
	entries, _ := r.store.Snapshot("p")
	st := desiredStatus(pol, entries)
	if len(st.Rebalances) != 1 || st.Rebalances[0].Reason != v1alpha1.ReasonShardedRebalance {
		t.Errorf("rebalances %+v, want the RSP listed as %s", st.Rebalances, v1alpha1.ReasonShardedRebalance)
	}
	if len(st.Conditions) == 0 || st.Conditions[0].Reason != v1alpha1.ReasonRebalanceHeld || !strings.Contains(st.Conditions[0].Message, "--shard") {
		t.Errorf("conditions %+v, want Rebalancing held naming --shard", st.Conditions)
	}
}
