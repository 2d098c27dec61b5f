package rebalance

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/planner"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func testSpec() v1alpha1.RebalanceSpec {
	return v1alpha1.RebalanceSpec{CapacityExhaustedAfter: "5s", ClusterFailedAfter: "10s", MinInterval: "5s",
		Failback: v1alpha1.FailbackSpec{StabilizationWindow: "20s", MaxStep: 2, MakeBeforeBreak: true}}
}

// reactiveSpec is testSpec capping members only on the Unschedulable
// signal: for the tests of that signal's timing, which a predictive cap
// of the same full member would otherwise come before.
func reactiveSpec() v1alpha1.RebalanceSpec {
	s := testSpec()
	s.Placement = v1alpha1.PlacementReactive
	return s
}

func TestAssess(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return timePtr(t0.Add(d)) }
	cases := []struct {
		name      string
		obs       observation
		prev      contract.MemberTimers
		now       time.Time
		state     planner.MemberState
		marks     contract.MemberTimers
		roomSince time.Time
		requeue   time.Time
		// kubefedReady is the planner's flag for a failure seen by fedfailover alone.
		kubefedReady bool
		// failing: not failed yet, counted by the federation guard.
		failing bool
	}{
		{name: "unhealthy first seen: not failed yet, timer starts",
			obs: observation{}, now: t0, state: planner.Healthy,
			marks: contract.MemberTimers{FailingSince: at(0)}, requeue: t0.Add(10 * time.Second), failing: true},
		{name: "unhealthy for clusterFailedAfter: failed",
			obs: observation{}, prev: contract.MemberTimers{FailingSince: at(0), RoomSince: at(-time.Minute)}, now: t0.Add(10 * time.Second),
			state: planner.Failed, marks: contract.MemberTimers{FailingSince: at(0)}},
		{name: "healthy again: failing timer cleared, room timer starts",
			obs: observation{Healthy: true, Running: 2, Fits: 4}, prev: contract.MemberTimers{FailingSince: at(0)}, now: t0.Add(time.Minute),
			state: planner.Healthy, marks: contract.MemberTimers{RoomSince: at(time.Minute)}, roomSince: t0.Add(time.Minute)},
		{name: "room timer kept while healthy with room",
			obs: observation{Healthy: true, Fits: 1}, prev: contract.MemberTimers{RoomSince: at(0)}, now: t0.Add(time.Hour),
			state: planner.Healthy, marks: contract.MemberTimers{RoomSince: at(0)}, roomSince: t0},
		{name: "no room: room timer cleared",
			obs: observation{Healthy: true, Running: 3}, prev: contract.MemberTimers{RoomSince: at(0)}, now: t0.Add(time.Hour),
			state: planner.Healthy},
		{name: "unschedulable, not long enough: wake up when it is",
			obs: observation{Healthy: true, Fits: 3, Unschedulable: true}, prev: contract.MemberTimers{RoomSince: at(-time.Hour), UnschedulableSince: microPtr(t0)}, now: t0.Add(2 * time.Second),
			state: planner.Healthy, requeue: t0.Add(5 * time.Second), marks: contract.MemberTimers{UnschedulableSince: microPtr(t0)}},
		{name: "unschedulable first seen: the timer starts now, on the host's clock",
			obs: observation{Healthy: true, Running: 3, Unschedulable: true}, now: t0,
			state: planner.Healthy, requeue: t0.Add(5 * time.Second), marks: contract.MemberTimers{UnschedulableSince: microPtr(t0)}},
		{name: "unschedulable for capacityExhaustedAfter since first seen: exhausted",
			obs: observation{Healthy: true, Running: 3, Unschedulable: true}, prev: contract.MemberTimers{UnschedulableSince: microPtr(t0)}, now: t0.Add(5 * time.Second),
			state: planner.Exhausted, marks: contract.MemberTimers{UnschedulableSince: microPtr(t0)}},
		{name: "schedulable again: the unschedulable timer is cleared",
			obs: observation{Healthy: true, Running: 3}, prev: contract.MemberTimers{UnschedulableSince: microPtr(t0)}, now: t0.Add(time.Hour),
			state: planner.Healthy},
		{name: "never connected by this process, kubefed Ready: unknown, no failing timer (startup grace)",
			obs: observation{KubefedReady: true, Unknown: true}, prev: contract.MemberTimers{FailingSince: at(-time.Hour)}, now: t0,
			state: planner.Healthy},
		{name: "unreachable to fedfailover only past clusterFailedAfter: not failed, kubefed does not confirm it",
			obs: observation{KubefedReady: true}, prev: contract.MemberTimers{FailingSince: at(0)}, now: t0.Add(10 * time.Second),
			state: planner.Healthy, marks: contract.MemberTimers{FailingSince: at(0)}, kubefedReady: true, failing: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := assess(c.obs, c.prev, testSpec(), c.now)
			if a.Member.State != c.state {
				t.Errorf("state %s, want %s", a.Member.State, c.state)
			}
			if !timeOf(a.Marks.FailingSince).Equal(timeOf(c.marks.FailingSince)) || !timeOf(a.Marks.RoomSince).Equal(timeOf(c.marks.RoomSince)) {
				t.Errorf("marks %+v, want %+v", a.Marks, c.marks)
			}
			if !a.Member.RoomSince.Equal(c.roomSince) {
				t.Errorf("roomSince %s, want %s", a.Member.RoomSince, c.roomSince)
			}
			if !a.RequeueAt.Equal(c.requeue) {
				t.Errorf("requeue %s, want %s", a.RequeueAt, c.requeue)
			}
			if a.Member.Failing != c.failing {
				t.Errorf("failing %v, want %v", a.Member.Failing, c.failing)
			}
			if c.state == planner.Failed && a.Member.KubefedReady != c.kubefedReady {
				t.Errorf("kubefedReady %v, want %v", a.Member.KubefedReady, c.kubefedReady)
			}
			if c.state == planner.Healthy && c.obs.Healthy && a.Member.Running != c.obs.Running {
				t.Errorf("running %d, want %d", a.Member.Running, c.obs.Running)
			}
		})
	}
}

func prefs(w1, w2 int64) map[string]fedschedv1a1.ClusterPreferences {
	return map[string]fedschedv1a1.ClusterPreferences{"member1": {Weight: w1}, "member2": {Weight: w2}}
}

func TestBaselineOf(t *testing.T) {
	user := contract.Placement{TotalReplicas: 6, Clusters: prefs(1, 1)}
	pinned := contract.Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{
		"member1": {MinReplicas: 6, MaxReplicas: ptr.To[int64](6), Weight: 6}, "member2": {MaxReplicas: ptr.To[int64](0)}}}

	m, edited := baselineOf(nil, user, fieldOwners{}, "p")
	if edited || !m.Baseline.Equal(user) || m.Applied == nil || !m.Applied.Equal(user) || m.Policy != "p" {
		t.Fatalf("first touch: %+v edited=%v", m, edited)
	}

	// Our own write, read back: not an edit, baseline kept.
	rec := &contract.RebalanceState{Baseline: user, Applied: &pinned, LastChange: timePtr(t0)}
	back, err := contract.DecodeRebalanceState(map[string]string{contract.AnnotationRebalance: rec.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	m, edited = baselineOf(back, pinned, ownersOf(nil), "p")
	if edited || !m.Baseline.Equal(user) || m.LastChange == nil {
		t.Fatalf("own write: %+v edited=%v", m, edited)
	}

	// Someone changed the spec while shifted: that is the new baseline.
	theirs := contract.Placement{TotalReplicas: 9, Clusters: prefs(2, 1)}
	m, edited = baselineOf(back, theirs, ownersOf(nil), "p")
	if !edited || !m.Baseline.Equal(theirs) || !m.Applied.Equal(theirs) || m.LastChange != nil {
		t.Fatalf("user edit: %+v edited=%v", m, edited)
	}
	if back.Baseline.Equal(theirs) {
		t.Fatal("baselineOf changed the recorded marks")
	}
}

func TestUnschedulableAndRunning(t *testing.T) {
	pending := func(at time.Time) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			LastTransitionTime: metav1.NewTime(at)}}}}
	}
	deleting := pending(t0.Add(-time.Hour))
	deleting.DeletionTimestamp = timePtr(t0)
	running := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	notReady := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	pods := []corev1.Pod{pending(t0.Add(3 * time.Second)), pending(t0), deleting, running, notReady}
	if !anyUnschedulable(compact(pods...)) {
		t.Error("anyUnschedulable false with two Unschedulable pods")
	}
	if anyUnschedulable(compact(running, deleting)) {
		t.Error("anyUnschedulable true with only a running pod and a deleting one")
	}
	if got := runningPods(compact(pods...)); got != 1 {
		t.Errorf("running %d, want 1", got)
	}
}

// compact is the pods as the member caches keep them.
func compact(pods ...corev1.Pod) []*cachedpod.Pod {
	out := make([]*cachedpod.Pod, len(pods))
	for i := range pods {
		out[i] = member.CompactPod(&pods[i])
	}
	return out
}

func TestStoreNotifiesOnChangeOnly(t *testing.T) {
	s := newStore()
	k := typesKey("ns", "web")
	e := rspEntry{status: v1alpha1.RebalanceStatus{Namespace: "ns", Name: "web", Shifted: true, Reason: planner.ReasonCapacityExhausted},
		show: true, placement: v1alpha1.ReasonShifted, detail: "ns/web: shifted"}
	s.Set(k, "p", e)
	s.Set(k, "p", e)
	if s.Pending() != 1 {
		t.Fatalf("%d notifications, want 1", s.Pending())
	}
	if got := desiredStatus(testPolicy(), snapshot(s, "p")); len(got.Rebalances) != 1 || !got.Rebalances[0].Shifted {
		t.Fatalf("status %+v", got)
	}
	e.show, e.placement, e.status.Shifted = false, v1alpha1.ReasonAtBaseline, false
	s.Set(k, "p", e)
	if got := desiredStatus(testPolicy(), snapshot(s, "p")); len(got.Rebalances) != 0 || s.Pending() != 2 {
		t.Fatalf("status after hide %+v, %d notifications", got, s.Pending())
	}
}

func snapshot(s *policystatus.Store[types.NamespacedName, rspEntry], policy string) map[types.NamespacedName]rspEntry {
	e, _ := s.Snapshot(policy)
	return e
}

func testPolicy() *v1alpha1.FailoverPolicy {
	spec := testSpec()
	return &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 3},
		Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
}

func TestPlacementOf(t *testing.T) {
	k := typesKey("demo", "web")
	healthy := map[string]planner.Member{"a": {State: planner.Healthy}, "b": {State: planner.Healthy}}
	failed := map[string]planner.Member{"a": {State: planner.Healthy}, "b": {State: planner.Failed}}
	placed := map[string]int64{"a": 6, "b": 0}
	cases := []struct {
		name    string
		members map[string]planner.Member
		res     planner.Result
		want    string
		detail  []string
	}{
		{name: "at baseline", members: failed, res: planner.Result{Reason: planner.ReasonBalanced}, want: v1alpha1.ReasonAtBaseline},
		{name: "shifted while a member is failed", members: failed,
			res:  planner.Result{Shifted: true, Reason: planner.ReasonMemberFailed, Placement: placed, TotalReplicas: 6},
			want: v1alpha1.ReasonShifted, detail: []string{"demo/web", "b Failed", "MemberFailed", "a=6 b=0"}},
		{name: "every member healthy: failing back", members: healthy,
			res:  planner.Result{Shifted: true, Reason: planner.ReasonStabilizing, Placement: placed, TotalReplicas: 6},
			want: v1alpha1.ReasonFailingBack, detail: []string{"returning to the baseline", "Stabilizing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, detail := placementOf(k, planner.Input{Members: c.members}, c.res)
			if got != c.want {
				t.Errorf("placement %s, want %s", got, c.want)
			}
			for _, d := range c.detail {
				if !strings.Contains(detail, d) {
					t.Errorf("detail %q lacks %q", detail, d)
				}
			}
		})
	}
}

func TestRebalancingCondition(t *testing.T) {
	entry := func(placement, detail string) rspEntry { return rspEntry{placement: placement, detail: detail} }
	cases := []struct {
		name    string
		entries map[types.NamespacedName]rspEntry
		status  metav1.ConditionStatus
		reason  string
		msg     string
	}{
		{name: "no RSP", status: metav1.ConditionFalse, reason: v1alpha1.ReasonAtBaseline, msg: "0 managed"},
		{name: "all at baseline", entries: map[types.NamespacedName]rspEntry{typesKey("a", "x"): entry(v1alpha1.ReasonAtBaseline, "")},
			status: metav1.ConditionFalse, reason: v1alpha1.ReasonAtBaseline, msg: "1 managed"},
		{name: "shifted beats failing back", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): entry(v1alpha1.ReasonFailingBack, "a/x back"), typesKey("b", "y"): entry(v1alpha1.ReasonShifted, "b/y away"),
			typesKey("c", "z"): entry(v1alpha1.ReasonAtBaseline, "")},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonShifted, msg: "a/x back; b/y away"},
		{name: "held beats shifted", entries: map[types.NamespacedName]rspEntry{
			typesKey("a", "x"): entry(v1alpha1.ReasonShifted, "a/x away"), typesKey("b", "y"): entry(v1alpha1.ReasonRebalanceHeld, "b/y held")},
			status: metav1.ConditionTrue, reason: v1alpha1.ReasonRebalanceHeld, msg: "a/x away; b/y held"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := desiredStatus(testPolicy(), c.entries)
			if len(st.Conditions) != 3 || meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRebalanceSuspended) == nil ||
				meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFailoverReady) == nil {
				t.Fatalf("conditions %+v, want Rebalancing, RebalanceSuspended and FailoverReady", st.Conditions)
			}
			got := st.Conditions[0]
			if got.Type != v1alpha1.ConditionRebalancing || got.Status != c.status || got.Reason != c.reason ||
				!strings.Contains(got.Message, c.msg) || got.ObservedGeneration != 3 {
				t.Errorf("condition %+v, want %s/%s with %q at generation 3", got, c.status, c.reason, c.msg)
			}
		})
	}
	off := testPolicy()
	off.Spec.Rebalance.Enabled = ptr.To(false)
	if st := desiredStatus(off, nil); len(st.Conditions) != 0 {
		t.Errorf("rebalance off, yet conditions %+v", st.Conditions)
	}
}

func typesKey(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func TestSpecFieldsSpellsOutZeros(t *testing.T) {
	got := specFields(contract.Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{
		"member1": {Weight: 1}, "member2": {MaxReplicas: ptr.To[int64](0)}}})
	cl := got["clusters"].(map[string]any)
	m1, m2 := cl["member1"].(map[string]any), cl["member2"].(map[string]any)
	if _, ok := m1["maxReplicas"]; ok || m1["minReplicas"] != int64(0) || m1["weight"] != int64(1) {
		t.Errorf("member1 %v", m1)
	}
	if m2["maxReplicas"] != int64(0) || m2["weight"] != int64(0) || m2["minReplicas"] != int64(0) {
		t.Errorf("member2 %v", m2)
	}
	if got["totalReplicas"] != int64(6) {
		t.Errorf("totalReplicas %v", got["totalReplicas"])
	}
}
