package planner

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type prefsMap = map[string]fedschedv1a1.ClusterPreferences

func w(weight int64) fedschedv1a1.ClusterPreferences {
	return fedschedv1a1.ClusterPreferences{Weight: weight}
}

func wMax(weight, maxReplicas int64) fedschedv1a1.ClusterPreferences {
	return fedschedv1a1.ClusterPreferences{Weight: weight, MaxReplicas: &maxReplicas}
}

func pin(v int64) fedschedv1a1.ClusterPreferences {
	return fedschedv1a1.ClusterPreferences{Weight: v, MinReplicas: v, MaxReplicas: &v}
}

func pins(a, b, c int64) prefsMap { return prefsMap{"a": pin(a), "b": pin(b), "c": pin(c)} }

func spec(makeBeforeBreak bool) v1alpha1.RebalanceSpec {
	return v1alpha1.RebalanceSpec{
		MinInterval: "30s",
		Failback:    v1alpha1.FailbackSpec{StabilizationWindow: "2m", MaxStep: 2, MakeBeforeBreak: makeBeforeBreak},
	}
}

func healthy(running, fits int64) Member {
	return Member{State: Healthy, Running: running, Fits: fits, RoomSince: now.Add(-time.Hour)}
}

func recovering(running, fits int64, since time.Duration) Member {
	return Member{State: Healthy, Running: running, Fits: fits, RoomSince: now.Add(-since)}
}

func failed() Member { return Member{State: Failed} }

// unobserved is a member whose cache has not synced yet.
func unobserved() Member { return Member{State: Healthy, KubefedReady: true, Unobserved: true} }

// unreachable is failed to fedfailover while kubefed reports it Ready.
func unreachable() Member { return Member{State: Failed, KubefedReady: true} }

// failing is unreachable to fedfailover, kubefed Ready, but not for
// clusterFailedAfter yet.
func failing() Member {
	return Member{State: Healthy, KubefedReady: true, Unobserved: true, Failing: true}
}

// unconfirmedMember is failed to fedfailover for clusterFailedAfter, kubefed
// not agreeing: as the controller passes it.
func unconfirmedMember() Member {
	return Member{State: Healthy, KubefedReady: true, Unobserved: true, Failing: true, Unconfirmed: true}
}

func guardOff() v1alpha1.RebalanceSpec {
	s := spec(false)
	all := intstr.FromString("100%")
	s.MaxFailedMembers = &all
	return s
}

// spilling is spec(false) with allowSpill.
func spilling() v1alpha1.RebalanceSpec {
	s := spec(false)
	s.AllowSpill = true
	return s
}

func exhausted(running, fits int64) Member {
	return Member{State: Exhausted, Running: running, Fits: fits}
}

var equal3 = prefsMap{"a": w(1), "b": w(1), "c": w(1)}

func TestPlan(t *testing.T) {
	tests := []struct {
		name          string
		in            Input
		wantReason    string
		wantChanged   bool
		wantShifted   bool
		wantPlacement map[string]int64
		wantTotal     int32
		wantClusters  prefsMap // checked when set
		wantRequeue   time.Time
	}{
		{name: "all healthy at baseline: nothing to do",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9,
				Members: map[string]Member{"a": healthy(3, 10), "b": healthy(3, 10), "c": healthy(3, 10)}},
			wantReason: ReasonBalanced, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		{name: "member failed: weight 0 and max 0, replicas move now despite minInterval",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9, LastChange: now.Add(-time.Second),
				Members: map[string]Member{"a": healthy(3, 10), "b": failed(), "c": healthy(3, 10)}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 5, "b": 0, "c": 4}, wantTotal: 9, wantClusters: pins(5, 0, 4)},
		{name: "failed member's replicas spill to members with room, even of weight 0",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1), "d": w(0)}, Current: prefsMap{"a": w(1), "b": w(1), "c": w(1), "d": w(0)},
				TotalReplicas: 9,
				Members:       map[string]Member{"a": healthy(3, 0), "b": failed(), "c": healthy(3, 1), "d": healthy(0, 10)}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 3, "b": 0, "c": 4, "d": 2}, wantTotal: 9},
		// Rule 4: maxReplicas is a hard cap (main relaxed it to a=10).
		{name: "baseline max is a hard cap: what exceeds it is not placed",
			in: Input{Baseline: prefsMap{"a": wMax(1, 5), "b": wMax(1, 5)}, Current: prefsMap{"a": wMax(1, 5), "b": wMax(1, 5)},
				TotalReplicas: 10, Members: map[string]Member{"a": healthy(5, 20), "b": failed()}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 5, "b": 0}, wantTotal: 10},
		{name: "allowSpill: baseline max relaxed to keep totalReplicas placed",
			in: Input{Baseline: prefsMap{"a": wMax(1, 5), "b": wMax(1, 5)}, Current: prefsMap{"a": wMax(1, 5), "b": wMax(1, 5)},
				TotalReplicas: 10, Members: map[string]Member{"a": healthy(5, 20), "b": failed()}, Spec: spilling()},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 10, "b": 0}, wantTotal: 10},
		// Rule 4: main spilled a=3 onto c, which the RSP does not list.
		{name: "a member the RSP does not list gets nothing, even with room",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, Current: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": failed(), "b": healthy(3, 0), "c": healthy(0, 10)}, Spec: spilling()},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 0, "b": 6, "c": 0}, wantTotal: 6},
		// Rule 4: main spilled onto c, outside the target's clusterSelector.
		{name: "a member outside the target's placement gets nothing",
			in: Input{Baseline: prefsMap{"*": w(1)}, Current: prefsMap{"*": w(1)}, TotalReplicas: 6,
				Members:  map[string]Member{"a": failed(), "b": healthy(3, 0), "c": healthy(0, 10)},
				Eligible: map[string]bool{"a": true, "b": true}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 0, "b": 6, "c": 0}, wantTotal: 6},
		// Rule 4: main read empty spec.clusters as "nothing anywhere" and
		// pinned 3:3 on the first pass.
		{name: "empty spec.clusters is kubefed's * weight 1: not pinned on the first pass",
			in: Input{TotalReplicas: 6,
				Members: map[string]Member{"a": {State: Healthy, Running: 3, Fits: 10}, "b": {State: Healthy, Running: 3, Fits: 10}}},
			wantReason: ReasonBalanced, wantPlacement: map[string]int64{"a": 3, "b": 3}, wantTotal: 6, wantClusters: prefsMap{}},
		// Before the federation guard this pinned every member to zero: the
		// whole workload gone because fedfailover could reach no member.
		{name: "every member failed: the federation guard keeps what kubefed has",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9,
				Members: map[string]Member{"a": failed(), "b": failed(), "c": failed()}},
			wantReason: ReasonTooManyMembersFailed, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		{name: "two of three failed: more than half, guard holds",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9,
				Members: map[string]Member{"a": failed(), "b": failed(), "c": healthy(3, 20)}},
			wantReason: ReasonTooManyMembersFailed, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		// TestPartitionBothMembersFromFedfailoverOnly: both members cut
		// from fedfailover, a few seconds apart. Counting Failed members
		// alone, the first to reach clusterFailedAfter was one of two
		// (not more than half) and MemberUnreachable pinned both members.
		{name: "one member failed, the other failing, not failed yet: the guard holds",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, Current: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": failed(), "b": failing()}},
			wantReason: ReasonTooManyMembersFailed, wantPlacement: map[string]int64{"a": 3, "b": 3}, wantTotal: 6,
			wantClusters: prefsMap{"a": w(1), "b": w(1)}},
		{name: "one member failed, the other failed to fedfailover only: it counts as failing, the guard holds",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, Current: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": failed(), "b": unreachable()}},
			wantReason: ReasonTooManyMembersFailed, wantPlacement: map[string]int64{"a": 3, "b": 3}, wantTotal: 6,
			wantClusters: prefsMap{"a": w(1), "b": w(1)}},
		{name: "one of three failed, one failing: more than half, guard holds",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9,
				Members: map[string]Member{"a": failed(), "b": failing(), "c": healthy(3, 20)}},
			wantReason: ReasonTooManyMembersFailed, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		{name: "one of four failed, one failing: half, the failed member's replicas move",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1), "d": w(1)}, Current: prefsMap{"a": w(1), "b": w(1), "c": w(1), "d": w(1)},
				TotalReplicas: 8, Members: map[string]Member{"a": failed(), "b": failing(), "c": healthy(2, 20), "d": healthy(2, 20)}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 0, "b": 2, "c": 3, "d": 3}, wantTotal: 8},
		{name: "members failing, none failed yet: no suspension, they keep what they hold",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9,
				Members: map[string]Member{"a": failing(), "b": failing(), "c": healthy(3, 20)}},
			wantReason: ReasonBalanced, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		{name: "every member unobserved (caches syncing): kept, and no suspension",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9,
				Members: map[string]Member{"a": unobserved(), "b": unobserved(), "c": unobserved()}},
			wantReason: ReasonMembersUnobserved, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		{name: "no room anywhere, one member unobserved: kept, and no suspension",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9,
				Members: map[string]Member{"a": unobserved(), "b": healthy(0, 0), "c": healthy(0, 0)}},
			wantReason: ReasonMembersUnobserved, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		{name: "every member failed, guard off: still never a placement nothing can run",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 9, Spec: guardOff(),
				Members: map[string]Member{"a": failed(), "b": failed(), "c": failed()}},
			wantReason: ReasonNoCapacityAnywhere, wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		// Item 8 of the safety review: fedfailover alone cannot reach a, kubefed
		// reports it Ready. Before, its replicas moved (make before break).
		// Now nothing moves until kubefed agrees.
		{name: "member failed to fedfailover only, room elsewhere: nothing moves",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, Current: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": unreachable(), "b": healthy(3, 10)}},
			wantReason: ReasonBalanced, wantPlacement: map[string]int64{"a": 3, "b": 3}, wantTotal: 6,
			wantClusters: prefsMap{"a": w(1), "b": w(1)}},
		{name: "member unconfirmed (the controller's reading), room elsewhere: nothing moves",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, Current: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": unconfirmedMember(), "b": healthy(3, 10)}},
			wantReason: ReasonBalanced, wantPlacement: map[string]int64{"a": 3, "b": 3}, wantTotal: 6,
			wantClusters: prefsMap{"a": w(1), "b": w(1)}},
		{name: "the same member once kubefed agrees: its replicas move",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, Current: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": failed(), "b": healthy(3, 10)}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 0, "b": 6}, wantTotal: 6},
		{name: "left mid make-before-break by an older version, member still unconfirmed: back to the user's total, it keeps its own",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, Current: prefsMap{"a": pin(3), "b": pin(6)}, TotalReplicas: 6,
				CurrentTotalReplicas: 9, Members: map[string]Member{"a": unreachable(), "b": healthy(6, 8)}},
			wantReason: ReasonFailbackBreak, wantChanged: true,
			wantPlacement: map[string]int64{"a": 3, "b": 3}, wantTotal: 6},
		{name: "exhausted member capped at running plus fits, rest by weight",
			in: Input{Baseline: prefsMap{"a": w(2), "b": w(1)}, Current: prefsMap{"a": w(2), "b": w(1)}, TotalReplicas: 9,
				Members: map[string]Member{"a": exhausted(4, 0), "b": healthy(3, 10)}},
			wantReason: ReasonCapacityExhausted, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 4, "b": 5}, wantTotal: 9},
		{name: "exhausted and nowhere has room: keep and report",
			in: Input{Baseline: prefsMap{"a": w(2), "b": w(1)}, Current: prefsMap{"a": w(2), "b": w(1)}, TotalReplicas: 9,
				Members: map[string]Member{"a": exhausted(4, 0), "b": healthy(3, 0)}},
			wantReason: ReasonInsufficientCapacity, wantPlacement: map[string]int64{"a": 6, "b": 3}, wantTotal: 9,
			wantClusters: prefsMap{"a": w(2), "b": w(1)}},
		{name: "exhaustion waits for minInterval",
			in: Input{Baseline: prefsMap{"a": w(2), "b": w(1)}, Current: prefsMap{"a": w(2), "b": w(1)}, TotalReplicas: 9,
				LastChange: now.Add(-10 * time.Second), Members: map[string]Member{"a": exhausted(4, 0), "b": healthy(3, 10)}},
			wantReason: ReasonMinInterval, wantPlacement: map[string]int64{"a": 6, "b": 3}, wantTotal: 9,
			wantRequeue: now.Add(20 * time.Second)},
		{name: "recovered member inside the stabilization window: stay shifted",
			in: Input{Baseline: equal3, Current: pins(5, 0, 4), TotalReplicas: 9, LastChange: now.Add(-time.Minute),
				Members: map[string]Member{"a": healthy(5, 10), "b": recovering(0, 10, time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonStabilizing, wantShifted: true, wantPlacement: map[string]int64{"a": 5, "b": 0, "c": 4}, wantTotal: 9,
			wantRequeue: now.Add(time.Minute)},
		{name: "recovered member without room: stay shifted",
			in: Input{Baseline: equal3, Current: pins(5, 0, 4), TotalReplicas: 9, LastChange: now.Add(-time.Hour),
				Members: map[string]Member{"a": healthy(5, 10), "b": {State: Healthy}, "c": healthy(4, 10)}},
			wantReason: ReasonBalanced, wantShifted: true, wantPlacement: map[string]int64{"a": 5, "b": 0, "c": 4}, wantTotal: 9},
		{name: "failback step of maxStep after the window",
			in: Input{Baseline: equal3, Current: pins(5, 0, 4), TotalReplicas: 9, LastChange: now.Add(-time.Minute), Spec: spec(false),
				Members: map[string]Member{"a": healthy(5, 10), "b": recovering(0, 10, 3*time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonFailback, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 3, "b": 2, "c": 4}, wantTotal: 9, wantClusters: pins(3, 2, 4),
			wantRequeue: now.Add(30 * time.Second)},
		{name: "failback waits for minInterval",
			in: Input{Baseline: equal3, Current: pins(3, 2, 4), TotalReplicas: 9, LastChange: now.Add(-10 * time.Second), Spec: spec(false),
				Members: map[string]Member{"a": healthy(3, 10), "b": recovering(2, 10, 3*time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonMinInterval, wantShifted: true, wantPlacement: map[string]int64{"a": 3, "b": 2, "c": 4}, wantTotal: 9,
			wantRequeue: now.Add(20 * time.Second)},
		{name: "last failback step restores the baseline verbatim",
			in: Input{Baseline: equal3, Current: pins(3, 2, 4), TotalReplicas: 9, LastChange: now.Add(-time.Minute), Spec: spec(false),
				Members: map[string]Member{"a": healthy(3, 10), "b": recovering(2, 10, 3*time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonFailback, wantChanged: true, wantShifted: false,
			wantPlacement: map[string]int64{"a": 3, "b": 3, "c": 3}, wantTotal: 9, wantClusters: equal3},
		{name: "make-before-break raises the returning member and totalReplicas",
			in: Input{Baseline: equal3, Current: pins(5, 0, 4), TotalReplicas: 9, LastChange: now.Add(-time.Minute), Spec: spec(true),
				Members: map[string]Member{"a": healthy(5, 10), "b": recovering(0, 10, 3*time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonFailbackMake, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 5, "b": 2, "c": 4}, wantTotal: 11, wantClusters: pins(5, 2, 4)},
		{name: "make-before-break waits for the raised replicas to run",
			in: Input{Baseline: equal3, Current: pins(5, 2, 4), TotalReplicas: 9, CurrentTotalReplicas: 11, LastChange: now.Add(-time.Minute), Spec: spec(true),
				Members: map[string]Member{"a": healthy(5, 10), "b": recovering(1, 10, 4*time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonWaitingForReplicas, wantShifted: true, wantPlacement: map[string]int64{"a": 5, "b": 2, "c": 4}, wantTotal: 11,
			wantRequeue: now.Add(time.Minute)},
		{name: "make-before-break shrinks the others once they run",
			in: Input{Baseline: equal3, Current: pins(5, 2, 4), TotalReplicas: 9, CurrentTotalReplicas: 11, LastChange: now.Add(-time.Minute), Spec: spec(true),
				Members: map[string]Member{"a": healthy(5, 10), "b": recovering(2, 10, 4*time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonFailbackBreak, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 3, "b": 2, "c": 4}, wantTotal: 9, wantClusters: pins(3, 2, 4)},
		{name: "make-before-break gives up waiting after the window",
			in: Input{Baseline: equal3, Current: pins(5, 2, 4), TotalReplicas: 9, CurrentTotalReplicas: 11, LastChange: now.Add(-3 * time.Minute), Spec: spec(true),
				Members: map[string]Member{"a": healthy(5, 10), "b": recovering(0, 10, 6*time.Minute), "c": healthy(4, 10)}},
			wantReason: ReasonFailbackBreak, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 3, "b": 2, "c": 4}, wantTotal: 9},
		{name: "failure during make-before-break restores totalReplicas at once",
			in: Input{Baseline: equal3, Current: pins(5, 2, 4), TotalReplicas: 9, CurrentTotalReplicas: 11, LastChange: now.Add(-time.Second), Spec: spec(true),
				Members: map[string]Member{"a": healthy(5, 10), "b": recovering(0, 10, 6*time.Minute), "c": failed()}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 5, "b": 4, "c": 0}, wantTotal: 9},
		{name: "user raised totalReplicas: placed at once",
			in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 12, CurrentTotalReplicas: 9,
				Members: map[string]Member{"a": healthy(3, 10), "b": healthy(3, 10), "c": healthy(3, 10)}},
			wantReason: ReasonTotalChanged, wantChanged: true, wantPlacement: map[string]int64{"a": 4, "b": 4, "c": 4}, wantTotal: 12,
			wantClusters: equal3},
		{name: "user edited the baseline while shifted: followed stepwise",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(2), "c": w(0)}, Current: pins(5, 0, 4), TotalReplicas: 9, LastChange: now.Add(-time.Hour),
				Members: map[string]Member{"a": healthy(5, 10), "b": failed(), "c": healthy(4, 10)}},
			wantReason: ReasonFailback, wantChanged: true, wantShifted: true, wantPlacement: map[string]int64{"a": 7, "b": 0, "c": 2}, wantTotal: 9},
		{name: "wildcard and non-member entries are kept",
			in: Input{Baseline: prefsMap{"*": w(1), "x": w(7)}, Current: prefsMap{"*": w(1), "x": w(7)}, TotalReplicas: 4,
				Members: map[string]Member{"a": healthy(2, 10), "b": failed()}},
			wantReason: ReasonMemberFailed, wantChanged: true, wantShifted: true,
			wantPlacement: map[string]int64{"a": 4, "b": 0}, wantTotal: 4,
			wantClusters: prefsMap{"*": w(1), "x": w(7), "a": pin(4), "b": pin(0)}},
		{name: "no members", in: Input{Baseline: equal3, Current: equal3, TotalReplicas: 3},
			wantReason: ReasonNoMembers, wantPlacement: map[string]int64{}, wantTotal: 3, wantClusters: equal3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.Now = now
			if in.Spec.MinInterval == "" {
				in.Spec = spec(false)
			}
			got := Plan(in)
			if got.Reason != tt.wantReason || got.Changed != tt.wantChanged || got.Shifted != tt.wantShifted || got.TotalReplicas != tt.wantTotal {
				t.Fatalf("got reason=%s changed=%v shifted=%v total=%d, want %s %v %v %d (placement %v)",
					got.Reason, got.Changed, got.Shifted, got.TotalReplicas, tt.wantReason, tt.wantChanged, tt.wantShifted, tt.wantTotal, got.Placement)
			}
			if !equalPlacement(got.Placement, tt.wantPlacement) {
				t.Errorf("placement %v, want %v", got.Placement, tt.wantPlacement)
			}
			if tt.wantClusters != nil && !contract.EqualPreferences(got.Clusters, tt.wantClusters) {
				t.Errorf("clusters %v, want %v", describe(got.Clusters), describe(tt.wantClusters))
			}
			if !tt.wantRequeue.IsZero() && !got.RequeueAt.Equal(tt.wantRequeue) {
				t.Errorf("requeue at %v, want %v", got.RequeueAt, tt.wantRequeue)
			}
			checkInvariants(t, in, got)
		})
	}
}

// TestFailbackConverges replays a whole failure and failback and counts changes.
func TestFailbackConverges(t *testing.T) {
	for _, mbb := range []bool{false, true} {
		in := Input{Baseline: equal3, Current: equal3, TotalReplicas: 9, Spec: spec(mbb), Now: now,
			Members: map[string]Member{"a": healthy(3, 10), "b": failed(), "c": healthy(3, 10)}}
		changes := 0
		for i := 0; i < 200 && (changes == 0 || !contract.EqualPreferences(in.Current, equal3) || in.CurrentTotalReplicas != 9); i++ {
			got := Plan(in)
			checkInvariants(t, in, got)
			if got.Changed {
				changes++
				in.Current, in.CurrentTotalReplicas, in.LastChange = got.Clusters, got.TotalReplicas, in.Now
			}
			in.Now = in.Now.Add(10 * time.Second)
			if i == 3 { // b comes back
				in.Members["b"] = Member{State: Healthy, Fits: 10, RoomSince: in.Now}
			}
			for n, m := range in.Members { // everything placed runs
				if m.State != Failed {
					m.Running = got.Placement[n]
					in.Members[n] = m
				}
			}
		}
		// 1 failure + ceil(3/2)=2 steps (x2 with make-before-break).
		want := 3
		if mbb {
			want = 5
		}
		if changes != want || !contract.EqualPreferences(in.Current, equal3) {
			t.Errorf("makeBeforeBreak=%v: %d changes, ended at %v; want %d changes back to baseline", mbb, changes, describe(in.Current), want)
		}
	}
}

func TestDistribute(t *testing.T) {
	names := []string{"a", "b", "c"}
	tests := []struct {
		name  string
		total int64
		prefs prefsMap
		want  map[string]int64
	}{
		{"weights", 10, prefsMap{"a": w(1), "b": w(2), "c": w(2)}, map[string]int64{"a": 2, "b": 4, "c": 4}},
		{"rounding to heaviest then name", 4, prefsMap{"a": w(1), "b": w(1), "c": w(1)}, map[string]int64{"a": 2, "b": 1, "c": 1}},
		{"min first, then weights", 6, prefsMap{"a": {MinReplicas: 4, Weight: 1}, "b": w(1)}, map[string]int64{"a": 5, "b": 1, "c": 0}},
		{"max spills to others", 10, prefsMap{"a": wMax(5, 2), "b": w(1), "c": w(1)}, map[string]int64{"a": 2, "b": 4, "c": 4}},
		{"no preferences: nothing", 10, prefsMap{"a": w(1)}, map[string]int64{"a": 10, "b": 0, "c": 0}},
		{"wildcard", 6, prefsMap{"*": w(1), "a": w(4)}, map[string]int64{"a": 4, "b": 1, "c": 1}},
		{"nowhere to go", 5, prefsMap{"a": wMax(1, 1)}, map[string]int64{"a": 1, "b": 0, "c": 0}},
		{"negative and huge values", 7, prefsMap{"a": {MinReplicas: -3, Weight: 1 << 62}, "b": {Weight: -5}}, map[string]int64{"a": 7, "b": 0, "c": 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := distribute(tt.total, names, func(n string) bounds { return boundsOf(tt.prefs, n) })
			if !equalPlacement(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func describe(m prefsMap) map[string]string {
	out := map[string]string{}
	for n, p := range m {
		maxS := "-"
		if p.MaxReplicas != nil {
			maxS = fmt.Sprint(*p.MaxReplicas)
		}
		out[n] = fmt.Sprintf("w%d min%d max%s", p.Weight, p.MinReplicas, maxS)
	}
	return out
}
