package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// drainSim plays kubefed and the kubelets around Plan: a member given
// fewer replicas runs fewer at once, one given more has them Ready only
// by the next pass (the slowest they can be). Passes are minInterval
// apart.
type drainSim struct {
	t       *testing.T
	in      Input
	fits    map[string]int64 // room beyond what runs, as the member started
	lowest  int64            // the fewest Ready replicas seen between passes
	raises  []int64          // how many replicas each make step added
	reasons []string
}

func newDrainSim(t *testing.T, running, fits map[string]int64, draining string) *drainSim {
	in := Input{Baseline: prefsMap{}, Members: map[string]Member{}, Now: now, Spec: spec(true), Assigned: map[string]int64{}}
	for n, r := range running {
		in.Baseline[n] = w(1)
		in.TotalReplicas += int32(r)
		in.Members[n] = Member{State: Healthy, Running: r, Fits: fits[n], RoomSince: now.Add(-time.Hour), Draining: n == draining}
		in.Assigned[n] = r
	}
	return &drainSim{t: t, in: in, fits: fits, lowest: 1 << 40}
}

// pass plans once, writes the result and plays the members.
func (s *drainSim) pass() Result {
	s.t.Helper()
	res := Plan(s.in)
	s.reasons = append(s.reasons, res.Reason)
	if res.Changed {
		if res.TotalReplicas > s.currentTotal() {
			s.raises = append(s.raises, int64(res.TotalReplicas-s.currentTotal()))
		}
		s.in.Current, s.in.CurrentTotalReplicas, s.in.LastChange = res.Clusters, res.TotalReplicas, s.in.Now
	}
	// Scale-downs at once; the Ready total is read before scale-ups.
	var ready int64
	for n, m := range s.in.Members {
		want := res.Placement[n]
		s.in.Assigned[n] = want
		if m.Running > want {
			m.Fits += m.Running - want
			m.Running = want
		}
		ready += m.Running
		s.in.Members[n] = m
	}
	s.lowest = min(s.lowest, ready)
	for n, m := range s.in.Members {
		if want := res.Placement[n]; m.Running < want {
			add := min(want-m.Running, m.Fits)
			m.Running += add
			m.Fits -= add
			s.in.Members[n] = m
		}
	}
	s.in.Now = s.in.Now.Add(s.in.Spec.MinInterval.Get())
	return res
}

func (s *drainSim) currentTotal() int32 {
	if s.in.CurrentTotalReplicas > 0 {
		return s.in.CurrentTotalReplicas
	}
	return s.in.TotalReplicas
}

// The drain of a member with room elsewhere: its replicas move off it
// stepwise (at most maxStep raised per step), Ready never below the
// user's total, until it holds none and totalReplicas is the user's.
func TestDrainMovesOffStepwise(t *testing.T) {
	s := newDrainSim(t, map[string]int64{"a": 4, "b": 4, "c": 4}, map[string]int64{"a": 10, "b": 10, "c": 10}, "a")
	var res Result
	for range 20 {
		res = s.pass()
	}
	if res.Placement["a"] != 0 || res.TotalReplicas != 12 || res.Placement["b"]+res.Placement["c"] != 12 {
		t.Fatalf("after the drain: placement %v total %d, want a empty and the user's 12 on b and c", res.Placement, res.TotalReplicas)
	}
	if s.lowest < 12 {
		t.Errorf("Ready fell to %d during the drain, want never below the user's 12", s.lowest)
	}
	if len(s.raises) < 2 {
		t.Errorf("make steps %v: want the 4 replicas moved in steps of maxStep 2", s.raises)
	}
	for _, r := range s.raises {
		if r > 2 {
			t.Errorf("a make step raised %d replicas at once, want at most maxStep 2: %v", r, s.raises)
		}
	}
	if !strings.Contains(strings.Join(s.reasons, ","), ReasonDrainBreak) {
		t.Errorf("reasons %v: want the drain's own break", s.reasons)
	}
	if p := DrainProgressOf(s.in, "a"); p.Left != 0 || p.Moved != 4 || !p.Drained() {
		t.Errorf("progress %+v, want 4 of 4 moved, drained", p)
	}
}

// Only as fast as the others have room: with room for one more on each
// of b and c, two replicas move, two stay on a, reported as waiting for
// room; nothing is Pending anywhere.
func TestDrainOnlyAsFarAsTheRoom(t *testing.T) {
	s := newDrainSim(t, map[string]int64{"a": 4, "b": 4, "c": 4}, map[string]int64{"a": 10, "b": 1, "c": 1}, "a")
	var res Result
	for range 12 {
		res = s.pass()
	}
	if res.Placement["a"] != 2 || res.TotalReplicas != 12 {
		t.Fatalf("placement %v total %d, want a keeping the 2 that fit nowhere else", res.Placement, res.TotalReplicas)
	}
	if res.Reason != ReasonDrainWaitingForRoom {
		t.Errorf("reason %s, want %s", res.Reason, ReasonDrainWaitingForRoom)
	}
	if s.lowest < 12 {
		t.Errorf("Ready fell to %d, want never below 12", s.lowest)
	}
	p := DrainProgressOf(s.in, "a")
	if p.Moved != 2 || p.Left != 2 || p.WaitingForRoom != 2 || !p.Drained() {
		t.Errorf("progress %+v, want 2 moved, 2 left waiting for room", p)
	}
}

// The break waits for the new replicas to be Ready however long it
// takes: unlike a failback's, no window lets it go sooner.
func TestDrainBreakWaitsForReady(t *testing.T) {
	in := Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6, Spec: spec(true),
		Current: prefsMap{"a": pin(3), "b": pin(5)}, CurrentTotalReplicas: 8, LastChange: now.Add(-time.Hour), Now: now,
		Members: map[string]Member{"a": {State: Healthy, Running: 3, Fits: 5, Draining: true}, "b": healthy(3, 5)}}
	res := Plan(in)
	if res.Changed || res.Reason != ReasonWaitingForReplicas {
		t.Fatalf("b with 3 of its 5 Ready an hour after the raise: %s changed=%v %v, want kept, waiting for replicas", res.Reason, res.Changed, res.Placement)
	}
	p := DrainProgressOf(in, "a")
	if p.Pending != 2 || len(p.PendingOn) != 1 || p.PendingOn[0] != "b" {
		t.Errorf("progress %+v, want 2 pending on b", p)
	}
	// kubefed has not given b its 5 yet: Ready pods may be on their way out.
	in.Members["b"] = healthy(5, 3)
	in.Assigned = map[string]int64{"a": 3, "b": 3}
	if res := Plan(in); res.Changed {
		t.Fatalf("b assigned 3 of its 5 by kubefed: %s %v, want the break to wait", res.Reason, res.Placement)
	}
	in.Assigned["b"] = 5
	res = Plan(in)
	if !res.Changed || res.Reason != ReasonDrainBreak || res.Placement["a"] != 1 || res.TotalReplicas != 6 {
		t.Fatalf("b's 5 Ready: %s %v total %d, want a lowered to 1, total 6", res.Reason, res.Placement, res.TotalReplicas)
	}
}

// Never below the total: a break that would leave fewer Ready than the
// user's total (b's raised replicas Ready, but one of a's kept ones not)
// is written only when it leaves at least as many as are Ready now.
func TestDrainNeverBelowTheTotal(t *testing.T) {
	in := Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6, Spec: spec(true),
		Current: prefsMap{"a": pin(3), "b": pin(5)}, CurrentTotalReplicas: 8, LastChange: now.Add(-time.Hour), Now: now,
		Members: map[string]Member{"a": {State: Healthy, Running: 3, Fits: 5, Draining: true}, "b": healthy(4, 5)}}
	// After the break a 1 (1 Ready), b 5 (4 Ready): 5 < min(6, 7).
	if res := Plan(in); res.Changed {
		t.Fatalf("a break leaving 5 Ready of 6: %s %v, want none", res.Reason, res.Placement)
	}
}

// A jump (a scale-up, here) during a drain never lowers the draining
// member at once: it keeps what it holds, totalReplicas raised by as much.
func TestDrainJumpKeepsTheDrainingMember(t *testing.T) {
	in := Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 10, Spec: spec(true),
		Current: prefsMap{"a": pin(3), "b": pin(3)}, CurrentTotalReplicas: 6, LastChange: now.Add(-time.Hour), Now: now,
		Members: map[string]Member{"a": {State: Healthy, Running: 3, Fits: 5, Draining: true}, "b": healthy(3, 20)}}
	res := Plan(in)
	if !res.Changed || res.Placement["a"] != 3 || res.Placement["b"] != 10 || res.TotalReplicas != 13 {
		t.Fatalf("scale-up to 10 during a's drain: %s %v total %d, want a kept at 3, b given 10, total 13", res.Reason, res.Placement, res.TotalReplicas)
	}
}

// A draining member fedfailover cannot read keeps what it holds: its
// Ready replicas cannot be counted.
func TestDrainUnobservedKeeps(t *testing.T) {
	in := Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6, Spec: spec(true), LastChange: now.Add(-time.Hour), Now: now,
		Current: prefsMap{"a": w(1), "b": w(1)},
		Members: map[string]Member{"a": {State: Healthy, KubefedReady: true, Unobserved: true, Draining: true}, "b": healthy(3, 20)}}
	if res := Plan(in); res.Changed {
		t.Fatalf("a unobserved: %s %v, want nothing moved", res.Reason, res.Placement)
	}
}

// Ending the maintenance is a failback: nothing moves back before the
// member's stabilization window (its room counts from the end), then
// maxStep at a time.
func TestDrainEndedFailsBackAfterTheWindow(t *testing.T) {
	s := newDrainSim(t, map[string]int64{"a": 3, "b": 3}, map[string]int64{"a": 10, "b": 10}, "a")
	for range 12 {
		s.pass()
	}
	if s.in.Members["a"].Running != 0 {
		t.Fatalf("setup: a still runs %d", s.in.Members["a"].Running)
	}
	end := s.in.Now
	a := s.in.Members["a"]
	a.Draining, a.RoomSince = false, end // the controller counts its room from the end
	s.in.Members["a"] = a
	for s.in.Now.Before(end.Add(2 * time.Minute)) {
		if res := s.pass(); res.Changed {
			t.Fatalf("%s after the end (window 2m): %s %v, want nothing before the window", s.in.Now.Sub(end), res.Reason, res.Placement)
		}
	}
	s.raises = nil
	var res Result
	for range 12 {
		res = s.pass()
	}
	if res.Placement["a"] != 3 || res.Placement["b"] != 3 || res.TotalReplicas != 6 || !equalPrefs(res.Clusters, s.in.Baseline) {
		t.Fatalf("after the window: %v total %d (%v), want the user's 3:3 and spec back", res.Placement, res.TotalReplicas, res.Clusters)
	}
	for _, r := range s.raises {
		if r > 2 {
			t.Errorf("failback raised %d at once, want at most maxStep 2: %v", r, s.raises)
		}
	}
	if s.lowest < 6 {
		t.Errorf("Ready fell to %d, want never below 6", s.lowest)
	}
}

func equalPrefs(a, b prefsMap) bool {
	if len(a) != len(b) {
		return false
	}
	for n, p := range a {
		q, ok := b[n]
		if !ok || p.Weight != q.Weight || p.MinReplicas != q.MinReplicas || (p.MaxReplicas == nil) != (q.MaxReplicas == nil) {
			return false
		}
	}
	return true
}

// The admission: the same figure as FailoverReadiness (plan --fail),
// refusal naming the RSP and the shortfall, unknown room refused, force
// accepting, other drained members taking nothing more.
func TestAdmitMaintenance(t *testing.T) {
	st := v1alpha1.RSPReadiness{Namespace: "ns", Name: "web", TotalReplicas: 6, Members: []v1alpha1.MemberReadiness{
		{Name: "a", Replicas: 3, Room: 6}, {Name: "b", Replicas: 3, Room: 4}}}
	want := FailoverReadiness(ReadinessInputFromStatus(st))["a"].Shortfall
	got := AdmitMaintenance("a", false, []v1alpha1.RSPReadiness{st}, nil)
	if got.Accept || got.Reason != v1alpha1.ReasonMaintenanceNoRoom || want != 2 || !strings.Contains(got.Message, "ns/web: 2 of its 6 replicas") {
		t.Errorf("b with room for 4 of 6: %+v (plan --fail: %d short), want refused naming ns/web and 2 of 6", got, want)
	}
	if got := AdmitMaintenance("b", false, []v1alpha1.RSPReadiness{st}, nil); !got.Accept || got.Reason != v1alpha1.ReasonMaintenanceAccepted {
		t.Errorf("a with room for 6: %+v, want accepted", got)
	}
	if got := AdmitMaintenance("a", true, []v1alpha1.RSPReadiness{st}, nil); !got.Accept || got.Reason != v1alpha1.ReasonMaintenanceForced {
		t.Errorf("forced: %+v, want accepted as forced", got)
	}
	three := v1alpha1.RSPReadiness{Namespace: "ns", Name: "web", TotalReplicas: 6, Members: []v1alpha1.MemberReadiness{
		{Name: "a", Replicas: 2, Room: 6}, {Name: "b", Replicas: 2, Room: 6}, {Name: "c", Replicas: 2, Room: 3}}}
	if got := AdmitMaintenance("a", false, []v1alpha1.RSPReadiness{three}, nil); !got.Accept {
		t.Errorf("b and c with room for 9: %+v, want accepted", got)
	}
	if got := AdmitMaintenance("a", false, []v1alpha1.RSPReadiness{three}, map[string]bool{"b": true}); got.Accept || !strings.Contains(got.Message, "1 of its 6") {
		t.Errorf("b under maintenance (takes nothing more, holds 2), c room 3: %+v, want refused, 1 of 6 short", got)
	}
	unknown := v1alpha1.RSPReadiness{Namespace: "ns", Name: "web", TotalReplicas: 6, Members: []v1alpha1.MemberReadiness{
		{Name: "a", Replicas: 3, Room: 6}, {Name: "b", Replicas: 3, Room: 3, Unobserved: true}}}
	if got := AdmitMaintenance("a", false, []v1alpha1.RSPReadiness{unknown}, nil); got.Accept || got.Reason != v1alpha1.ReasonMaintenanceRoomUnknown {
		t.Errorf("b unobserved: %+v, want refused, room unknown", got)
	}
	if got := AdmitMaintenance("z", false, []v1alpha1.RSPReadiness{st}, nil); !got.Accept {
		t.Errorf("a member no RSP uses: %+v, want accepted (nothing to move)", got)
	}
}

// A member fails during another's maintenance: its replicas go to the
// members not under maintenance (the draining one keeps its own, now, and
// takes none of the failed member's); with no other member left, they go
// to the draining one, as kubefed alone would put them.
func TestDrainingMemberIsTheLastResort(t *testing.T) {
	three := Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1)}, TotalReplicas: 6, Spec: spec(true),
		Current: prefsMap{"a": w(1), "b": w(1), "c": w(1)}, LastChange: now.Add(-time.Hour), Now: now,
		Members: map[string]Member{"a": {State: Healthy, Running: 2, Fits: 10, Draining: true}, "b": failed(), "c": healthy(2, 10)}}
	res := Plan(three)
	if res.Reason != ReasonMemberFailed || res.Placement["a"] != 2 || res.Placement["b"] != 0 || res.Placement["c"] != 6 || res.TotalReplicas != 8 {
		t.Errorf("b failed during a's drain: %s %v total %d, want b's replicas on c (6), a keeping its 2 until the break, total 8",
			res.Reason, res.Placement, res.TotalReplicas)
	}
	two := Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6, Spec: spec(true),
		Current: prefsMap{"a": pin(0), "b": pin(6)}, LastChange: now.Add(-time.Hour), Now: now,
		Members: map[string]Member{"a": {State: Healthy, Running: 0, Fits: 10, Draining: true}, "b": failed()}}
	res = Plan(two)
	if res.Placement["a"] != 6 || res.TotalReplicas != 6 {
		t.Errorf("b failed after a was drained, no other member: %s %v total %d, want all 6 on a", res.Reason, res.Placement, res.TotalReplicas)
	}
}
