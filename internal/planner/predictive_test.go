package planner

import (
	"maps"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// placedOn is a healthy member (room since long ago) whose replicas bound
// there are placed, of which running serve, with fits more to fit.
func placedOn(placed, running, fits int64) Member {
	m := healthy(running, fits)
	m.Placed = placed
	return m
}

// noRoomYet is placedOn without room: it never had any, so it is not stable.
func noRoomYet(placed, running int64) Member {
	return Member{State: Healthy, Running: running, Placed: placed}
}

func reactive() v1alpha1.RebalanceSpec {
	s := spec(true)
	s.Placement = v1alpha1.PlacementReactive
	return s
}

// Predictive placement: a member assigned more than its bound replicas
// plus what fits is capped there at once, without waiting for its pods to
// be Unschedulable for capacityExhaustedAfter; what has no room anywhere
// stays where it is; nothing bound is taken away; and no prediction is
// made without the member's bound count, for a member fedfailover does
// not read, or with placement Reactive. (InsufficientCapacity without a
// move is the status's word for replicas beyond the Ready replicas plus
// what fits, which is what the readiness figures count.)
func TestPlanPredictive(t *testing.T) {
	two := prefsMap{"a": w(1), "b": w(1)}
	tests := []struct {
		name          string
		in            Input
		wantReason    string
		wantChanged   bool
		wantPlacement map[string]int64
	}{
		{name: "scale-up into a full member: capped at what it holds, the rest to the member with room",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10,
				Members: map[string]Member{"a": placedOn(5, 5, 10), "b": noRoomYet(3, 3)}},
			wantReason: ReasonCapacityPredicted, wantChanged: true, wantPlacement: map[string]int64{"a": 7, "b": 3}},
		{name: "room for some: capped at bound plus fits",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10,
				Members: map[string]Member{"a": placedOn(5, 5, 10), "b": placedOn(3, 3, 1)}},
			wantReason: ReasonCapacityPredicted, wantChanged: true, wantPlacement: map[string]int64{"a": 6, "b": 4}},
		{name: "a rollout's old pods hold the room: bound replicas count whether Ready or not",
			in: Input{Baseline: two, Current: two, TotalReplicas: 6,
				Members: map[string]Member{"a": placedOn(3, 3, 10), "b": noRoomYet(3, 0)}},
			wantReason: ReasonInsufficientCapacity, wantPlacement: map[string]int64{"a": 3, "b": 3}},
		{name: "no room elsewhere either: nothing moves",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10,
				Members: map[string]Member{"a": noRoomYet(5, 5), "b": noRoomYet(3, 3)}},
			wantReason: ReasonInsufficientCapacity, wantPlacement: map[string]int64{"a": 5, "b": 5}},
		{name: "reactive: waits for the Unschedulable signal",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10, Spec: reactive(),
				Members: map[string]Member{"a": placedOn(5, 5, 10), "b": noRoomYet(3, 3)}},
			wantReason: ReasonInsufficientCapacity, wantPlacement: map[string]int64{"a": 5, "b": 5}},
		{name: "bound count not known (a summary of an older version): no prediction",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10,
				Members: map[string]Member{"a": placedOn(5, 5, 10), "b": noRoomYet(-1, 3)}},
			wantReason: ReasonInsufficientCapacity, wantPlacement: map[string]int64{"a": 5, "b": 5}},
		{name: "a member fedfailover does not read: keeps what it holds",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10,
				Members: map[string]Member{"a": placedOn(5, 5, 10), "b": unobserved()}},
			wantReason: ReasonBalanced, wantPlacement: map[string]int64{"a": 5, "b": 5}},
		{name: "the only other member is one fedfailover does not read: nothing is sent to it",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10,
				Members: map[string]Member{"a": unobserved(), "b": noRoomYet(3, 3)}},
			wantReason: ReasonInsufficientCapacity, wantPlacement: map[string]int64{"a": 5, "b": 5}},
		{name: "within minInterval of the last change: waits for it",
			in: Input{Baseline: two, Current: two, TotalReplicas: 10, LastChange: now.Add(-10 * time.Second),
				Members: map[string]Member{"a": placedOn(5, 5, 10), "b": noRoomYet(3, 3)}},
			wantReason: ReasonMinInterval, wantPlacement: map[string]int64{"a": 5, "b": 5}},
		{name: "capped member back to full room: failback only after the stabilization window",
			in: Input{Baseline: two, Current: prefsMap{"a": pin(7), "b": pin(3)}, TotalReplicas: 10,
				Members: map[string]Member{"a": placedOn(7, 7, 10), "b": {State: Healthy, Running: 3, Placed: 3, Fits: 5, RoomSince: now.Add(-time.Minute)}}},
			wantReason: ReasonStabilizing, wantPlacement: map[string]int64{"a": 7, "b": 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.Spec.Failback.MaxStep == 0 && tc.in.Spec.Placement == "" {
				tc.in.Spec = spec(true)
			}
			tc.in.Now = now
			got := Plan(tc.in)
			if got.Reason != tc.wantReason || got.Changed != tc.wantChanged || !maps.Equal(got.Placement, tc.wantPlacement) {
				t.Errorf("Plan: reason %s, changed %v, placement %v; want %s, %v, %v",
					got.Reason, got.Changed, got.Placement, tc.wantReason, tc.wantChanged, tc.wantPlacement)
			}
			for n, m := range tc.in.Members {
				if bound := max(m.Placed, m.Running); got.Changed && got.Placement[n] < bound {
					t.Errorf("%s: given %d, below its %d bound replicas", n, got.Placement[n], bound)
				}
			}
		})
	}
}
