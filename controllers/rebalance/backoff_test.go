package rebalance

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
)

func TestFailbackBackoff(t *testing.T) {
	spec := testSpec() // stabilizationWindow 20s
	at := timePtr(t0)
	cases := []struct {
		name   string
		prev   contract.MemberTimers
		state  planner.MemberState
		now    time.Time
		last   *metav1.Time
		level  int
		backed bool
	}{
		{name: "no failback: level kept", prev: contract.MemberTimers{Backoff: 2}, state: planner.Exhausted, now: t0, level: 2},
		{name: "exhausted on probation: one level more", prev: contract.MemberTimers{LastFailback: at, Backoff: 1}, state: planner.Exhausted,
			now: t0.Add(10 * time.Second), level: 2, backed: true},
		{name: "level capped", prev: contract.MemberTimers{LastFailback: at, Backoff: maxBackoff}, state: planner.Exhausted,
			now: t0.Add(time.Second), level: maxBackoff, backed: true},
		{name: "healthy on probation: still on it", prev: contract.MemberTimers{LastFailback: at, Backoff: 1}, state: planner.Healthy,
			now: t0.Add(39 * time.Second), last: at, level: 1},
		{name: "probation (backed-off window, 40s) passed: back to level 0", prev: contract.MemberTimers{LastFailback: at, Backoff: 1},
			state: planner.Healthy, now: t0.Add(40 * time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			last, level, backed := failbackBackoff(c.prev, c.state, spec, c.now)
			if !timeOf(last).Equal(timeOf(c.last)) || level != c.level || backed != c.backed {
				t.Errorf("got %v, %d, %v; want %v, %d, %v", last, level, backed, c.last, c.level, c.backed)
			}
		})
	}
}

// Rule 7, end to end in one process: a failback marks the member's
// probation; the member running out of capacity right after it raises its
// backoff level (annotation, gauge, one Warning event), and that doubles the
// wait before its next failback.
func TestExhaustedRightAfterFailbackBacksOff(t *testing.T) {
	spec := testSpec()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "osc"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	user := contract.Placement{TotalReplicas: 6, Clusters: prefs(1, 1)}
	six, zero := int64(6), int64(0)
	shifted := contract.Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{
		"member1": {MinReplicas: 6, MaxReplicas: &six, Weight: 6}, "member2": {MaxReplicas: &zero}}}
	long := timePtr(t0.Add(-time.Hour))
	state := &contract.RebalanceState{Policy: "osc", Baseline: user, Applied: &shifted, LastChange: long,
		Members: map[string]contract.MemberTimers{"member2": {RoomSince: long}}}
	r, c, rec, key := rspWithAnnotation(t, state.Encode(), pol)
	rsp := specOf(t, c, key)
	rsp.Spec.Clusters = shifted.Clusters
	if err := c.Update(t.Context(), rsp); err != nil {
		t.Fatal(err)
	}
	deploy := func() []client.Object {
		return []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "d-web",
			Annotations: map[string]string{revisionAnnotation: "1"}}}, replicaSet("web-1", "rs-1", "1", "d-web")}
	}
	fm := noMembers(t)
	fm.add(t, "member1", append(deploy(), readyNode("n1", 20))...)
	fm.add(t, "member2", append(deploy(), readyNode("n2", 20))...)
	r.members = fm

	passAt(t, r, key, t0) // failback step toward 3:3
	m := recordedState(t, c, key)
	if m.Members["member2"].LastFailback == nil {
		t.Fatalf("no probation recorded for member2 after the failback: %+v (plan %+v)", m.Members, specOf(t, c, key).Spec)
	}
	drain(rec.Events)

	// member2's new pods cannot be scheduled: its room was overestimated.
	full := noMembers(t)
	full.add(t, "member1", append(deploy(), readyNode("n1", 20))...)
	full.add(t, "member2", append(deploy(), podOf("p1", "rs-1", false), podOf("p2", "rs-1", false))...)
	r.members = full
	passAt(t, r, key, t0.Add(time.Second))   // Unschedulable first seen
	passAt(t, r, key, t0.Add(6*time.Second)) // and for capacityExhaustedAfter (5s) since
	m = recordedState(t, c, key)
	if got := m.Members["member2"]; got.Backoff != 1 || got.LastFailback != nil {
		t.Errorf("member2 timers %+v, want backoff 1 and the probation over", got)
	}
	if n := countPrefix(drain(rec.Events), "Warning "+ReasonFailbackBackoff+" "); n != 2 {
		t.Errorf("%d FailbackBackoff events, want one on the RSP and one on the policy", n)
	}
	if v := testutil.ToFloat64(metrics.RebalanceFailbackBackoff.WithLabelValues("demo", "web", "member2")); v != 1 {
		t.Errorf("fedfailover_rebalance_failback_backoff = %v, want 1", v)
	}
}

// Rule 7 in the planner: a member at backoff level 2 waits 4x the window.
func TestBackoffDelaysFailback(t *testing.T) {
	spec := testSpec() // 20s window
	base := map[string]fedschedv1a1.ClusterPreferences{"a": {Weight: 1}, "b": {Weight: 1}}
	cur := map[string]fedschedv1a1.ClusterPreferences{"a": {Weight: 6, MinReplicas: 6, MaxReplicas: ptr.To[int64](6)}, "b": {MaxReplicas: ptr.To[int64](0)}}
	in := planner.Input{Baseline: base, Current: cur, TotalReplicas: 6, Now: t0, Spec: spec,
		Members: map[string]planner.Member{
			"a": {State: planner.Healthy, Running: 6, Fits: 10, RoomSince: t0.Add(-time.Hour), KubefedReady: true},
			"b": {State: planner.Healthy, Fits: 10, RoomSince: t0.Add(-30 * time.Second), KubefedReady: true, Backoff: 2}}}
	if res := planner.Plan(in); res.Changed || res.Reason != planner.ReasonStabilizing || !res.RequeueAt.Equal(t0.Add(50*time.Second)) {
		t.Errorf("backoff 2: %s changed=%v requeue %v, want Stabilizing until roomSince+80s", res.Reason, res.Changed, res.RequeueAt)
	}
	b := in.Members["b"]
	b.Backoff = 0
	in.Members["b"] = b
	if res := planner.Plan(in); !res.Changed || len(res.FailedBack) != 1 || res.FailedBack[0] != "b" {
		t.Errorf("no backoff: %s changed=%v failedBack %v, want a failback to b", res.Reason, res.Changed, res.FailedBack)
	}
}

func recordedState(t *testing.T, c client.Client, key types.NamespacedName) *contract.RebalanceState {
	t.Helper()
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := c.Get(t.Context(), key, rsp); err != nil {
		t.Fatal(err)
	}
	m, err := contract.DecodeRebalanceState(rsp.Annotations)
	if err != nil || m == nil {
		t.Fatalf("state %v, %v", m, err)
	}
	return m
}
