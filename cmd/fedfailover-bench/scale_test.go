package main

import (
	"testing"
)

func TestLabNodesPerMemberKeepsOneOn(t *testing.T) {
	for _, c := range []struct{ offs, members, want int }{{10, 3, 5}, {10, 20, 2}, {2, 2, 2}, {0, 3, 1}, {9, 3, 4}} {
		if got := labNodesPerMember(c.offs, c.members); got != c.want {
			t.Errorf("%d power-offs over %d members: %d lab nodes each, want %d", c.offs, c.members, got, c.want)
		}
	}
}

func TestScaleTargets(t *testing.T) {
	r := &scResult{PodsTotal: 60000, RSSAfterSyncMB: 250, RSSAfterSteadyMB: 310, CPUPercent: 1.5,
		Taint: &scLatency{Samples: []float64{0.2, 0.9}, P99: 0.9}, Shift: &scLatency{Samples: []float64{0.5}, P99: 0.5, Missing: 1}}
	got := scTargets(r)
	want := map[string]string{"rss": "MISS", "cpu": "PASS", "member_writes": "PASS", "host_writes": "PASS", "taint": "PASS", "shift": "MISS"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s (a missing decision is a miss; RSS counts its worst reading)", k, got[k], v)
		}
	}
	r.PodsTotal, r.HostOtherWrites = 2000, 0.1
	got = scTargets(r)
	if got["rss"] != "-" || got["host_writes"] != "MISS" || got["member_writes"] != "PASS" {
		t.Errorf("small size: rss %s (want -: the target is for the goal size), host writes %s (want MISS), member writes %s (want PASS)",
			got["rss"], got["host_writes"], got["member_writes"])
	}
}
