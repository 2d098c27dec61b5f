package rebalance

import (
	"reflect"
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

// shiftedToMember1 is the policy "osc" with spec, the user's 1/1 placement
// of 6 replicas, the same 6 shifted all to member1, and a time an hour
// before t0.
func shiftedToMember1(spec *v1alpha1.RebalanceSpec) (*v1alpha1.FailoverPolicy, contract.Placement, contract.Placement, *metav1.Time) {
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "osc"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: spec}}
	user := contract.Placement{TotalReplicas: 6, Clusters: prefs(1, 1)}
	six, zero := int64(6), int64(0)
	shifted := contract.Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{
		"member1": {MinReplicas: 6, MaxReplicas: &six, Weight: 6}, "member2": {MaxReplicas: &zero}}}
	return pol, user, shifted, timePtr(t0.Add(-time.Hour))
}

// Rule 7, end to end in one process: a failback marks the member's
// probation; the member running out of capacity right after it raises its
// backoff level (annotation, gauge, one Warning event), and that doubles the
// wait before its next failback.
func TestExhaustedRightAfterFailbackBacksOff(t *testing.T) {
	spec := testSpec()
	pol, user, shifted, long := shiftedToMember1(&spec)
	state := &contract.RebalanceState{Policy: "osc", Baseline: user, Applied: &shifted, LastChange: long,
		Members: map[string]contract.MemberTimers{"member2": {RoomSince: long}}}
	r, c, rec, key := rspWithState(t, state, pol)
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

	// The recorded room onset (an hour ago) is not this process's own
	// sighting: the stabilization window counts from its first pass.
	passAt(t, r, key, t0.Add(-spec.Failback.StabilizationWindow.Get()))
	passAt(t, r, key, t0) // failback step toward 3:3
	m := recordedState(t, c, key)
	if m.Members["member2"].LastFailback == nil {
		t.Fatalf("no probation recorded for member2 after the failback: %+v (plan %+v)", m.Members, specOf(t, c, key).Spec)
	}
	drain(rec.Events)
	// The probation is what this process did: a record edited to drop it
	// does not end it.
	m.Members["member2"] = contract.MemberTimers{RoomSince: m.Members["member2"].RoomSince}
	putRecord(t, c, key, m)

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
	return contract.StateFromRecord(&recordOf(t, c, key).Spec)
}

// The onsets in the RSP's annotation are a record, never authority: anyone
// who can write the RSP (or a restore from an old backup) can set them. A
// member failing, Unschedulable or with room since long ago by the
// annotation waits clusterFailedAfter, capacityExhaustedAfter or the
// stabilization window from this process's own first sighting, like a
// restarted process.
func TestRecordedOnsetsDoNotShortenAWait(t *testing.T) {
	spec := reactiveSpec() // failed after 10s, exhausted after 5s, window 20s
	pol, user, shifted, long := shiftedToMember1(&spec)
	deploy := func() []client.Object {
		return []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "d-web",
			Annotations: map[string]string{revisionAnnotation: "1"}}}, replicaSet("web-1", "rs-1", "1", "d-web")}
	}
	cases := []struct {
		name  string
		marks contract.MemberTimers
		// from is the RSP's placement before the passes.
		from contract.Placement
		// member2 as the passes see it
		members func(t *testing.T) *fakeMembers
		wait    time.Duration
	}{
		{name: "failing since an hour ago", marks: contract.MemberTimers{FailingSince: long}, from: user,
			members: func(t *testing.T) *fakeMembers {
				fm := noMembers(t)
				fm.add(t, "member1", append(deploy(), readyNode("n1", 20))...)
				fm.add(t, "member2", deploy()...)
				fm.kill("member2")
				return fm
			}, wait: spec.ClusterFailedAfter.Get()},
		{name: "Unschedulable since an hour ago", marks: contract.MemberTimers{UnschedulableSince: microPtr(t0.Add(-time.Hour))}, from: user,
			members: func(t *testing.T) *fakeMembers {
				fm := noMembers(t)
				fm.add(t, "member1", append(deploy(), readyNode("n1", 20))...)
				fm.add(t, "member2", append(deploy(), podOf("p1", "rs-1", false))...)
				return fm
			}, wait: spec.CapacityExhaustedAfter.Get()},
		{name: "room since an hour ago", marks: contract.MemberTimers{RoomSince: long}, from: shifted,
			members: func(t *testing.T) *fakeMembers {
				fm := noMembers(t)
				fm.add(t, "member1", append(deploy(), readyNode("n1", 20))...)
				fm.add(t, "member2", append(deploy(), readyNode("n2", 20))...)
				return fm
			}, wait: spec.Failback.StabilizationWindow.Get()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := &contract.RebalanceState{Policy: "osc", Baseline: user, Applied: &tc.from, LastChange: long,
				Members: map[string]contract.MemberTimers{"member2": tc.marks}}
			r, c, _, key := rspWithState(t, state, pol)
			rsp := specOf(t, c, key)
			rsp.Spec.Clusters = tc.from.Clusters
			if err := c.Update(t.Context(), rsp); err != nil {
				t.Fatal(err)
			}
			r.members = tc.members(t)
			passAt(t, r, key, t0)
			if got := specOf(t, c, key).Spec.Clusters; !reflect.DeepEqual(got, tc.from.Clusters) {
				t.Fatalf("first pass changed the RSP on the recorded onset alone: %v", got)
			}
			passAt(t, r, key, t0.Add(tc.wait-time.Second))
			if got := specOf(t, c, key).Spec.Clusters; !reflect.DeepEqual(got, tc.from.Clusters) {
				t.Fatalf("changed %s after the first sighting, before the whole wait (%s): %v", tc.wait-time.Second, tc.wait, got)
			}
			passAt(t, r, key, t0.Add(tc.wait+time.Second))
			if got := specOf(t, c, key).Spec.Clusters; reflect.DeepEqual(got, tc.from.Clusters) {
				t.Fatalf("not changed once the wait passed since this process's first sighting: %v", got)
			}
		})
	}
}

// A hold (policy paused, or its selectors unusable) clears the process's
// sightings: nothing is observed meanwhile, so a member seen failing
// before the hold waits clusterFailedAfter again from the first pass
// after it, whatever the annotation still records.
func TestHoldClearsSightings(t *testing.T) {
	spec := testSpec() // failed after 10s
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "held"}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	r, c, _, key := rspWithAnnotation(t, "", pol)
	user := specOf(t, c, key).Spec.Clusters
	deploy := func() []client.Object {
		return []client.Object{&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "d-web",
			Annotations: map[string]string{revisionAnnotation: "1"}}}, replicaSet("web-1", "rs-1", "1", "d-web")}
	}
	fm := noMembers(t)
	fm.add(t, "member1", append(deploy(), readyNode("n1", 20))...)
	fm.add(t, "member2", deploy()...)
	fm.kill("member2")
	r.members = fm
	pause := func(paused bool) {
		t.Helper()
		got := &v1alpha1.FailoverPolicy{}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(pol), got); err != nil {
			t.Fatal(err)
		}
		got.Spec.Paused = paused
		if err := c.Update(t.Context(), got); err != nil {
			t.Fatal(err)
		}
	}

	passAt(t, r, key, t0) // member2 failing, first seen
	if m := recordedState(t, c, key); !timeOf(m.Members["member2"].FailingSince).Equal(t0) {
		t.Fatalf("member2 timers %+v, want failing since t0", m.Members["member2"])
	}
	pause(true)
	passAt(t, r, key, t0.Add(5*time.Second)) // held
	pause(false)
	passAt(t, r, key, t0.Add(11*time.Second)) // past t0+clusterFailedAfter: a sighting from before the hold would fail it
	if got := specOf(t, c, key).Spec.Clusters; !reflect.DeepEqual(got, user) {
		t.Fatalf("shifted on a sighting from before the hold: %v", got)
	}
	passAt(t, r, key, t0.Add(22*time.Second)) // clusterFailedAfter since the first pass after the hold
	if got := specOf(t, c, key).Spec.Clusters; reflect.DeepEqual(got, user) {
		t.Fatalf("not shifted clusterFailedAfter after the first sighting since the hold: %v", got)
	}
}

// sightedTimers: the onsets are the process's own, never the record's;
// the backoff level is the larger; the last failback is the record's only
// when the process has none.
func TestSightedTimers(t *testing.T) {
	old, recent := timePtr(t0.Add(-time.Hour)), timePtr(t0)
	cases := []struct {
		name                string
		recorded, own, want contract.MemberTimers
	}{
		{name: "no sighting of its own: no onset, whatever the record says",
			recorded: contract.MemberTimers{FailingSince: old, UnschedulableSince: microPtr(t0.Add(-time.Hour)), RoomSince: old}},
		{name: "a recorded onset older than the own sighting: the own sighting",
			recorded: contract.MemberTimers{FailingSince: old, RoomSince: old},
			own:      contract.MemberTimers{FailingSince: recent, RoomSince: recent},
			want:     contract.MemberTimers{FailingSince: recent, RoomSince: recent}},
		{name: "backoff: the larger of the two",
			recorded: contract.MemberTimers{Backoff: 3}, own: contract.MemberTimers{Backoff: 1}, want: contract.MemberTimers{Backoff: 3}},
		{name: "a recorded backoff of 0 does not lower the own",
			own: contract.MemberTimers{Backoff: 2}, want: contract.MemberTimers{Backoff: 2}},
		{name: "last failback: the own one",
			recorded: contract.MemberTimers{LastFailback: old}, own: contract.MemberTimers{LastFailback: recent},
			want: contract.MemberTimers{LastFailback: recent}},
		{name: "last failback: the record's when the process has none",
			recorded: contract.MemberTimers{LastFailback: old}, want: contract.MemberTimers{LastFailback: old}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sightedTimers(tc.recorded, tc.own); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
