package planner

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// short is a member's readiness as the tests write it: "s" the shortfall,
// "?" when not known.
func short(r Readiness) string {
	if !r.Known {
		return fmt.Sprintf("%d held, ?", r.Replicas)
	}
	return fmt.Sprintf("%d held, %d short", r.Replicas, r.Shortfall)
}

func TestFailoverReadiness(t *testing.T) {
	cases := []struct {
		name     string
		in       Input
		want     map[string]string
		wantRoom map[string]int64
	}{
		{
			name: "room to spare: any one member's replicas fit on the others",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": healthy(3, 10), "b": healthy(3, 10)}},
			want:     map[string]string{"a": "3 held, 0 short", "b": "3 held, 0 short"},
			wantRoom: map[string]int64{"a": 6, "b": 6}, // at most totalReplicas
		},
		{
			name: "the other member has room for one more: two of six stay Pending",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": healthy(3, 10), "b": healthy(3, 1)}},
			want:     map[string]string{"a": "3 held, 2 short", "b": "3 held, 0 short"},
			wantRoom: map[string]int64{"a": 6, "b": 4},
		},
		{
			name: "three members: the room of both others counts",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": healthy(2, 0), "b": healthy(2, 1), "c": healthy(2, 2)}},
			want: map[string]string{"a": "2 held, 0 short", "b": "2 held, 0 short", "c": "2 held, 1 short"},
		},
		{
			name: "a member already failed has no room: its replicas already count against the others",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1)}, TotalReplicas: 6,
				Current: prefsMap{"a": pin(3), "b": pin(0), "c": pin(3)},
				Members: map[string]Member{"a": healthy(3, 1), "b": failed(), "c": healthy(3, 2)}},
			want:     map[string]string{"a": "3 held, 1 short", "b": "0 held, 0 short", "c": "3 held, 2 short"},
			wantRoom: map[string]int64{"a": 4, "b": 0, "c": 5},
		},
		{
			name: "an exhausted member counts its running replicas and the estimate",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": healthy(3, 5), "b": exhausted(2, 0)}},
			want: map[string]string{"a": "3 held, 4 short", "b": "3 held, 0 short"},
		},
		{
			name: "the baseline's maxReplicas bounds what a member may take without allowSpill",
			in: Input{Baseline: prefsMap{"a": wMax(1, 4), "b": w(1)}, TotalReplicas: 6, Spec: spec(false),
				Members: map[string]Member{"a": healthy(3, 10), "b": healthy(3, 10)}},
			want:     map[string]string{"a": "3 held, 0 short", "b": "3 held, 2 short"},
			wantRoom: map[string]int64{"a": 4, "b": 6},
		},
		{
			name: "allowSpill lifts the baseline's maxReplicas",
			in: Input{Baseline: prefsMap{"a": wMax(1, 4), "b": w(1)}, TotalReplicas: 6, Spec: spilling(),
				Members: map[string]Member{"a": healthy(3, 10), "b": healthy(3, 10)}},
			want: map[string]string{"a": "3 held, 0 short", "b": "3 held, 0 short"},
		},
		{
			name: "a member outside the target's placement takes nothing, whatever its room",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1)}, TotalReplicas: 6,
				Eligible: map[string]bool{"a": true, "b": true},
				Members:  map[string]Member{"a": healthy(3, 1), "b": healthy(3, 1), "c": unobserved()}},
			want:     map[string]string{"a": "3 held, 2 short", "b": "3 held, 2 short", "c": "0 held, 0 short"},
			wantRoom: map[string]int64{"c": 0},
		},
		{
			name: "an unobserved member keeps what it holds: the others' figures are not known, its own is",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": healthy(2, 1), "b": healthy(2, 1), "c": unobserved()}},
			want:     map[string]string{"a": "2 held, ?", "b": "2 held, ?", "c": "2 held, 0 short"},
			wantRoom: map[string]int64{"c": 2},
		},
		{
			name: "failed to fedfailover alone while kubefed reports it Ready is unobserved",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": healthy(3, 0), "b": unreachable()}},
			want:     map[string]string{"a": "3 held, ?", "b": "3 held, 3 short"},
			wantRoom: map[string]int64{"a": 3, "b": 3},
		},
		{
			name: "two unobserved members: no figure is known but theirs cannot be either",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1), "c": w(1)}, TotalReplicas: 6,
				Members: map[string]Member{"a": healthy(2, 9), "b": failing(), "c": unconfirmedMember()}},
			want: map[string]string{"a": "2 held, ?", "b": "2 held, ?", "c": "2 held, ?"},
		},
		{
			name: "the user's totalReplicas counts, not a make-before-break raise",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 4, CurrentTotalReplicas: 6,
				Current: prefsMap{"a": pin(4), "b": pin(2)},
				Members: map[string]Member{"a": healthy(4, 0), "b": healthy(2, 1)}},
			want:     map[string]string{"a": "4 held, 1 short", "b": "2 held, 0 short"},
			wantRoom: map[string]int64{"a": 4, "b": 3},
		},
		{
			name: "no replicas, nothing short",
			in: Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 0,
				Members: map[string]Member{"a": healthy(0, 0), "b": failed()}},
			want: map[string]string{"a": "0 held, 0 short", "b": "0 held, 0 short"},
		},
		{
			name: "the wildcard entry is not a member",
			in: Input{Baseline: prefsMap{"*": w(1)}, TotalReplicas: 4,
				Members: map[string]Member{"*": healthy(9, 9), "a": healthy(2, 0), "b": healthy(2, 0)}},
			want: map[string]string{"a": "2 held, 2 short", "b": "2 held, 2 short"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = now
			ri := ReadinessInputOf(c.in)
			got := map[string]string{}
			for n, r := range FailoverReadiness(ri) {
				got[n] = short(r)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("readiness %v, want %v (input %+v)", got, c.want, ri)
			}
			for n, want := range c.wantRoom {
				if have := ri.Members[n].Room; have != want {
					t.Errorf("room of %s = %d, want %d", n, have, want)
				}
			}
		})
	}
}

// TestReadinessCapsRoomAtTotal: the published room never exceeds
// totalReplicas, so a member with ample room does not change the status
// at every pod it runs; and the cap changes no shortfall.
func TestReadinessCapsRoomAtTotal(t *testing.T) {
	in := Input{Baseline: prefsMap{"a": w(1), "b": w(1)}, TotalReplicas: 6, Now: now,
		Members: map[string]Member{"a": healthy(3, 100), "b": healthy(3, 2)}}
	ri := ReadinessInputOf(in)
	if ri.Members["a"].Room != 6 {
		t.Fatalf("room of a = %d, want 6 (totalReplicas)", ri.Members["a"].Room)
	}
	in.Members["a"] = healthy(3, 101)
	if again := ReadinessInputOf(in); !maps.Equal(again.Members, ri.Members) {
		t.Errorf("one more replica of room changed the input: %+v, then %+v", ri.Members, again.Members)
	}
}

// randomInput is a federation of 2-4 members with random weights, limits
// and health, placing up to 12 replicas.
func randomInput(rng *rand.Rand) Input {
	in := Input{Baseline: prefsMap{}, TotalReplicas: int32(rng.IntN(13)), Members: map[string]Member{}, Now: now,
		Spec: spec(false)}
	if rng.IntN(3) == 0 {
		in.Spec.AllowSpill = true
	}
	for i := range 2 + rng.IntN(3) {
		n := string(rune('a' + i))
		p := w(int64(rng.IntN(3)))
		if rng.IntN(4) == 0 {
			p = wMax(p.Weight, int64(rng.IntN(6)))
		}
		in.Baseline[n] = p
		running, fits := int64(rng.IntN(6)), int64(rng.IntN(8))
		switch rng.IntN(8) {
		case 0:
			in.Members[n] = failed()
		case 1:
			in.Members[n] = unobserved()
		case 2:
			in.Members[n] = exhausted(running, fits)
		case 3:
			in.Members[n] = unreachable()
		default:
			in.Members[n] = healthy(running, fits)
		}
	}
	if rng.IntN(4) == 0 {
		in.Eligible = map[string]bool{"a": true, "c": true}
	}
	return in
}

// TestReadinessStatusRoundTrip: what the controller publishes
// (ReadinessStatus) read back by the CLI (ReadinessInputFromStatus) gives
// the same readiness, and the published shortfalls are the function's.
func TestReadinessStatusRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 32))
	for i := range 2000 {
		in := randomInput(rng)
		ri := ReadinessInputOf(in)
		want := FailoverReadiness(ri)
		st := ReadinessStatus("ns", "rsp", ri)
		if got := FailoverReadiness(ReadinessInputFromStatus(st)); !maps.Equal(got, want) {
			t.Fatalf("case %d: read back %v, computed %v (input %+v, status %+v)", i, got, want, ri, st)
		}
		if len(st.Members) != len(want) || !slices.IsSortedFunc(st.Members, func(a, b v1alpha1.MemberReadiness) int { return cmpName(a.Name, b.Name) }) {
			t.Fatalf("case %d: status members %+v, want one per member, by name", i, st.Members)
		}
		for _, m := range st.Members {
			r := want[m.Name]
			if (m.Shortfall != nil) != r.Known || (m.Shortfall != nil && int64(*m.Shortfall) != r.Shortfall) {
				t.Fatalf("case %d: %s published shortfall %v, computed %+v", i, m.Name, m.Shortfall, r)
			}
		}
	}
}

func cmpName(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestReadinessIsWhatThePlannerLeavesUnplaced: with every member
// observed, stable and running what the RSP places there (the common
// case), a member's shortfall is exactly what the planner itself leaves
// beyond the known room (Result.Unplaced) once that member is Failed.
func TestReadinessIsWhatThePlannerLeavesUnplaced(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 32))
	checked := 0
	for i := range 3000 {
		in := randomInput(rng)
		in.Spec.MaxFailedMembers = guardOff().MaxFailedMembers
		// Placement first: every member runs what it is given, and has
		// random room beyond that.
		placed := ReadinessInputOf(Input{Baseline: in.Baseline, TotalReplicas: in.TotalReplicas, Eligible: in.Eligible,
			Members: allHealthy(in.Baseline), Now: now}).Members
		for n := range in.Members {
			in.Members[n] = Member{State: Healthy, Running: placed[n].Replicas, Fits: int64(rng.IntN(6)),
				RoomSince: now.Add(-time.Hour), KubefedReady: true}
		}
		ri := ReadinessInputOf(in)
		for x, r := range FailoverReadiness(ri) {
			if !r.Known {
				t.Fatalf("case %d: %s unknown with every member observed", i, x)
			}
			failedX := maps.Clone(in.Members)
			failedX[x] = failed()
			planned := in
			planned.Members = failedX
			if res := Plan(planned); res.Unplaced != r.Shortfall {
				t.Fatalf("case %d: %s fails: the planner leaves %d unplaced, readiness says %d short (input %+v, readiness input %+v)",
					i, x, res.Unplaced, r.Shortfall, in, ri)
			}
			checked++
		}
	}
	if checked < 5000 {
		t.Fatalf("checked only %d failures", checked)
	}
}

func allHealthy(baseline map[string]fedschedv1a1.ClusterPreferences) map[string]Member {
	out := map[string]Member{}
	for n := range baseline {
		out[n] = healthy(0, 0)
	}
	return out
}
