package bench

import (
	"testing"

	"k8s.io/utils/ptr"
)

func TestSummarizeFailback(t *testing.T) {
	all := []rbMeasure{
		{Scenario: "member-failure", Mode: "fedfailover", Seconds: ptr.To(20.0), MinReady: 3, FailbackSeconds: ptr.To(150.0), FailbackMinReady: ptr.To(int32(6))},
		{Scenario: "member-failure", Mode: "fedfailover", Seconds: ptr.To(22.0), MinReady: 3, FailbackSeconds: ptr.To(170.0), FailbackMinReady: ptr.To(int32(5))},
		{Scenario: "member-failure", Mode: "kubefed", Seconds: ptr.To(74.0), MinReady: 3, FailbackSeconds: ptr.To(30.0), FailbackMinReady: ptr.To(int32(3))},
		{Scenario: "exhaustion", Mode: "fedfailover", Seconds: ptr.To(12.0), MinReady: 3},
	}
	f := summarizeFailback(all, "fedfailover")
	if f.median == nil || *f.median != 160 || f.minReady != 5 || f.recovered != 2 {
		t.Errorf("fedfailover failback %+v, want median 160, min Ready 5, 2 recovered", f)
	}
	// A run that never got back hides no figure behind the others.
	all = append(all, rbMeasure{Scenario: "member-failure", Mode: "kubefed", Seconds: ptr.To(75.0), MinReady: 3})
	k := summarizeFailback(all, "kubefed")
	if k.median != nil || k.recovered != 1 || k.minReady != 3 {
		t.Errorf("kubefed failback %+v, want no median (1 of 2 back), min Ready 3", k)
	}
}

func TestRebalanceGoals(t *testing.T) {
	s := func(p95 float64, minReady int32) rbSummary {
		return rbSummary{median: ptr.To(p95), p95: ptr.To(p95), recovered: 1, minReady: minReady}
	}
	ok := rbGoals(s(12, 3), s(72, 3), s(28, 3), s(74, 3), s(160, 6), s(30, 3), ptr.To(6.0))
	if !ok["exhaustion"] || !ok["member_failure"] || !ok["min_ready"] {
		t.Errorf("goals %v, want all met", ok)
	}
	bad := rbGoals(s(25, 3), s(72, 3), s(31, 3), s(74, 3), s(160, 2), s(30, 3), ptr.To(2.9))
	if bad["exhaustion"] || bad["member_failure"] || bad["min_ready"] {
		t.Errorf("goals %v, want none met", bad)
	}
}

// Scale-up figures per mode: the most replicas placed beyond room, the
// longest they were wanted there, and every false cap summed.
func TestScaleUpCounts(t *testing.T) {
	all := []rbMeasure{
		{Scenario: "scale-up", Mode: "predictive", PlacedBeyondRoom: ptr.To(int32(3)), BeyondRoomSeconds: ptr.To(0.5), FalseCaps: ptr.To(0)},
		{Scenario: "scale-up", Mode: "predictive", PlacedBeyondRoom: ptr.To(int32(2)), BeyondRoomSeconds: ptr.To(0.8), FalseCaps: ptr.To(2)},
		{Scenario: "scale-up", Mode: "reactive", PlacedBeyondRoom: ptr.To(int32(3)), BeyondRoomSeconds: ptr.To(10.2), FalseCaps: ptr.To(0)},
		{Scenario: "exhaustion", Mode: "fedfailover", PlacedBeyondRoom: ptr.To(int32(9))},
	}
	placed, secs, falseCaps := scaleUpCounts(all)
	if placed["predictive"] != 3 || secs["predictive"] != 0.8 || falseCaps["predictive"] != 2 {
		t.Errorf("predictive: placed %d, seconds %v, false caps %d; want 3, 0.8, 2", placed["predictive"], secs["predictive"], falseCaps["predictive"])
	}
	if placed["reactive"] != 3 || secs["reactive"] != 10.2 || falseCaps["reactive"] != 0 {
		t.Errorf("reactive: placed %d, seconds %v, false caps %d; want 3, 10.2, 0", placed["reactive"], secs["reactive"], falseCaps["reactive"])
	}
	if _, ok := placed["fedfailover"]; ok {
		t.Error("another scenario's figures counted as scale-up")
	}
}

func TestLoadRange(t *testing.T) {
	lo, hi := loadRange([]rbMeasure{{LoadAvg1: 1.2}, {LoadAvg1: 0.4}, {LoadAvg1: 0.9}})
	if lo != 0.4 || hi != 1.2 {
		t.Errorf("load range %.2f-%.2f, want 0.40-1.20", lo, hi)
	}
}
