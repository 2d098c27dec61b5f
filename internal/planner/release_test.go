package planner

import (
	"fmt"
	"testing"

	"github.com/fedfailover/fedfailover/internal/contract"
)

func TestRelease(t *testing.T) {
	user := prefsMap{"a": w(1), "b": w(1)}
	shifted := prefsMap{"a": pin(6), "b": pin(0)}
	up := func(running, fits int64) Member {
		return Member{State: Healthy, KubefedReady: true, Running: running, Fits: fits}
	}
	notReady := Member{State: Failed}
	cases := []struct {
		name    string
		current prefsMap
		total   int32 // current spec.totalReplicas (0: the user's 6)
		a, b    Member
		step    int32 // maxStep (0: 2)
		// want
		done, changed bool
		reason        string
		placement     string // fmt of Placement
		wantTotal     int32
		waits         string // member:reason, in order
		stepsLeft     int
	}{
		{name: "b not Ready in kubefed keeps its pin", current: shifted, a: up(6, 10), b: notReady,
			reason: ReasonReleaseWaiting, placement: "map[a:6 b:0]", wantTotal: 6, waits: "b:" + WaitNotReady, stepsLeft: 2},
		{name: "b unreadable to fedfailover, kubefed Ready: its pin stays", current: shifted, a: up(6, 10), b: unobserved(),
			reason: ReasonReleaseWaiting, placement: "map[a:6 b:0]", wantTotal: 6, waits: "b:" + WaitUnobserved, stepsLeft: 2},
		{name: "b out of room: nothing sent there", current: shifted, a: up(6, 10), b: up(0, 0),
			reason: ReasonReleaseWaiting, placement: "map[a:6 b:0]", wantTotal: 6, waits: "b:" + WaitNoRoom, stepsLeft: 2},
		{name: "b with Unschedulable replicas: nothing sent there", current: shifted, a: up(6, 10), b: Member{State: Exhausted, KubefedReady: true, Fits: 5},
			reason: ReasonReleaseWaiting, placement: "map[a:6 b:0]", wantTotal: 6, waits: "b:" + WaitUnschedulable, stepsLeft: 2},
		{name: "b back with room: first step, make before break", current: shifted, a: up(6, 10), b: up(0, 10),
			changed: true, reason: ReasonReleaseStep, placement: "map[a:6 b:2]", wantTotal: 8, waits: "b:" + WaitReplicas, stepsLeft: 1},
		{name: "step made, b's replicas not Ready yet: wait", current: prefsMap{"a": pin(6), "b": pin(2)}, total: 8, a: up(6, 10), b: up(0, 8),
			reason: ReasonWaitingForReplicas, placement: "map[a:6 b:2]", wantTotal: 8, waits: "b:" + WaitReplicas, stepsLeft: 1},
		{name: "step made, b's replicas Ready: break", current: prefsMap{"a": pin(6), "b": pin(2)}, total: 8, a: up(6, 10), b: up(2, 8),
			changed: true, reason: ReasonReleaseBreak, placement: "map[a:4 b:2]", wantTotal: 6, stepsLeft: 1},
		{name: "second step", current: prefsMap{"a": pin(4), "b": pin(2)}, a: up(4, 10), b: up(2, 8),
			changed: true, reason: ReasonReleaseStep, placement: "map[a:4 b:3]", wantTotal: 7, waits: "b:" + WaitReplicas},
		{name: "every member at its share: the user's spec", current: prefsMap{"a": pin(3), "b": pin(3)}, a: up(3, 10), b: up(3, 8),
			done: true, changed: true, reason: ReasonReleased, placement: "map[a:3 b:3]", wantTotal: 6},
		{name: "already the user's spec", current: user, a: notReady, b: up(3, 8),
			done: true, reason: ReasonReleased, placement: "map[a:3 b:3]", wantTotal: 6},
		{name: "maxStep above the shift: one step", current: shifted, a: up(6, 10), b: up(0, 10), step: 10,
			changed: true, reason: ReasonReleaseStep, placement: "map[a:6 b:3]", wantTotal: 9, waits: "b:" + WaitReplicas},
		{name: "b with room for 2 of its 3", current: shifted, a: up(6, 10), b: up(0, 2), step: 10,
			changed: true, reason: ReasonReleaseStep, placement: "map[a:6 b:2]", wantTotal: 8, waits: "b:" + WaitReplicas, stepsLeft: 1},
		{name: "b full at 2 of its 3: waits for room", current: prefsMap{"a": pin(4), "b": pin(2)}, a: up(4, 10), b: up(2, 0),
			reason: ReasonReleaseWaiting, placement: "map[a:4 b:2]", wantTotal: 6, waits: "b:" + WaitNoRoom, stepsLeft: 1},
		{name: "b's raised replicas Unschedulable: the step is taken back", current: prefsMap{"a": pin(6), "b": pin(2)}, total: 8,
			a: up(6, 10), b: Member{State: Exhausted, KubefedReady: true},
			changed: true, reason: ReasonReleaseBreak, placement: "map[a:6 b:0]", wantTotal: 6, waits: "b:" + WaitUnschedulable, stepsLeft: 2},
		{name: "b fails in kubefed holding a step: its replicas move, as kubefed alone would", current: prefsMap{"a": pin(4), "b": pin(2)},
			a: up(4, 10), b: notReady,
			changed: true, reason: ReasonMemberFailed, placement: "map[a:6 b:0]", wantTotal: 6, waits: "b:" + WaitNotReady, stepsLeft: 2},
		{name: "a short of Ready replicas of its own does not block the break", current: prefsMap{"a": pin(6), "b": pin(2)}, total: 8,
			a: up(4, 10), b: up(2, 8),
			changed: true, reason: ReasonReleaseBreak, placement: "map[a:4 b:2]", wantTotal: 6, stepsLeft: 1},
		{name: "both not Ready in kubefed: the guard holds", current: shifted, a: notReady, b: notReady,
			reason: ReasonTooManyMembersFailed, placement: "map[a:6 b:0]", wantTotal: 6, waits: "b:" + WaitNotReady, stepsLeft: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			step := tc.step
			if step == 0 {
				step = 2
			}
			got := Release(ReleaseInput{Baseline: user, TotalReplicas: 6, Current: tc.current, CurrentTotalReplicas: tc.total,
				Members: map[string]Member{"a": tc.a, "b": tc.b}, MaxStep: step})
			var waits string
			for i, w := range got.Waiting {
				if i > 0 {
					waits += ","
				}
				waits += w.Member + ":" + w.Reason
			}
			if got.Done != tc.done || got.Changed != tc.changed || got.Reason != tc.reason || fmt.Sprint(got.Placement) != tc.placement ||
				got.TotalReplicas != tc.wantTotal || waits != tc.waits || got.StepsLeft != tc.stepsLeft {
				t.Errorf("got done=%v changed=%v %s %v total %d waits %q stepsLeft %d\nwant done=%v changed=%v %s %s total %d waits %q stepsLeft %d",
					got.Done, got.Changed, got.Reason, got.Placement, got.TotalReplicas, waits, got.StepsLeft,
					tc.done, tc.changed, tc.reason, tc.placement, tc.wantTotal, tc.waits, tc.stepsLeft)
			}
			if got.Done && !contract.EqualPreferences(got.Clusters, user) {
				t.Errorf("done with spec.clusters %v, want the user's own %v", got.Clusters, user)
			}
		})
	}
}

// A whole release, kubefed and the kubelets played as slowly as they can
// be (fewer replicas at once, more Ready only by the next decision): the
// Ready replicas never fall below the user's total, no step gives a member
// more than maxStep, and it ends with the user's spec.
func TestReleaseRunsStepwise(t *testing.T) {
	for _, step := range []int32{1, 2, 3, 10} {
		user := prefsMap{"a": w(1), "b": w(2), "c": w(1)}
		current, total := prefsMap{"a": pin(4), "b": pin(0), "c": pin(4)}, int32(8)
		running := map[string]int64{"a": 4, "b": 0, "c": 4}
		done := false
		for i := 0; i < 40 && !done; i++ {
			ms := map[string]Member{}
			for n, r := range running {
				ms[n] = Member{State: Healthy, KubefedReady: true, Running: r, Fits: 20 - r}
			}
			got := Release(ReleaseInput{Baseline: user, TotalReplicas: 8, Current: current, CurrentTotalReplicas: total, Members: ms, MaxStep: step})
			if got.Placement["b"]-running["b"] > int64(step) {
				t.Fatalf("maxStep %d: decision %d gives b %d more at once", step, i, got.Placement["b"]-running["b"])
			}
			var ready int64
			for n := range running {
				running[n] = min(running[n], got.Placement[n])
				ready += running[n]
			}
			if ready < 8 {
				t.Fatalf("maxStep %d: decision %d (%s %v) leaves %d Ready, want 8 at least", step, i, got.Reason, got.Placement, ready)
			}
			for n := range running {
				running[n] = max(running[n], got.Placement[n])
			}
			current, total, done = got.Clusters, got.TotalReplicas, got.Done
		}
		if !done || !contract.EqualPreferences(current, user) || total != 8 {
			t.Errorf("maxStep %d: ended at %v total %d, want the user's spec", step, current, total)
		}
	}
}
