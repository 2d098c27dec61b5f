package fencing

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

func TestLost(t *testing.T) {
	tests := []struct {
		name      string
		node      *corev1.Node
		now       time.Time
		wantLost  bool
		wantSince time.Time
	}{
		{"nil node", nil, t0, false, time.Time{}},
		{"ready", node("n", corev1.ConditionTrue, t0, nil), t0.Add(time.Hour), false, time.Time{}},
		{"no Ready condition", node("n", "", time.Time{}, nil), t0.Add(time.Hour), false, time.Time{}},
		{"not ready, no transition time", node("n", corev1.ConditionFalse, time.Time{}, nil), t0.Add(time.Hour), false, time.Time{}},
		{"unknown, too recent", node("n", corev1.ConditionUnknown, t0, nil), t0.Add(59 * time.Second), false, t0},
		{"unknown, exactly notReadyFor", node("n", corev1.ConditionUnknown, t0, nil), t0.Add(time.Minute), true, t0},
		{"false, long ago", node("n", corev1.ConditionFalse, t0, nil), t0.Add(time.Hour), true, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lost, since := Lost(tt.node, time.Minute, tt.now)
			if lost != tt.wantLost || !since.Equal(tt.wantSince) {
				t.Fatalf("Lost = %v, %v; want %v, %v", lost, since, tt.wantLost, tt.wantSince)
			}
		})
	}
}

func TestStorm(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	count := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	tests := []struct {
		name        string
		lost, total int
		max         *intstr.IntOrString
		want        bool
	}{
		{"issue example: 3 of 5 at 40%", 3, 5, pct("40%"), true},
		{"2 of 5 at 40%", 2, 5, pct("40%"), false},
		{"percent rounds down: 1 of 2 at 40%", 1, 2, pct("40%"), true},
		{"1 of 3 at 40%", 1, 3, pct("40%"), false},
		{"nil means 40%", 3, 5, nil, true},
		{"count", 2, 10, count(2), false},
		{"count exceeded", 3, 10, count(2), true},
		{"zero allowed", 1, 10, count(0), true},
		{"nothing lost", 0, 0, count(0), false},
		{"100%", 10, 10, pct("100%"), false},
		{"invalid allows none", 1, 10, pct("lots"), true},
		{"negative count allows none", 1, 10, count(-3), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Storm(tt.lost, tt.total, tt.max); got != tt.want {
				t.Fatalf("Storm(%d, %d, %v) = %v, want %v", tt.lost, tt.total, tt.max, got, tt.want)
			}
		})
	}
}

func TestNextStormState(t *testing.T) {
	cooldown := 5 * time.Minute
	active := StormState{Active: true}
	ended := StormState{Active: true, EndedAt: t0}
	tests := []struct {
		name     string
		prev     StormState
		storming bool
		now      time.Time
		want     StormDecision
	}{
		{"calm stays calm", StormState{}, false, t0, StormDecision{}},
		{"storm starts", StormState{}, true, t0, StormDecision{State: active, Suspended: true}},
		{"storm goes on", active, true, t0, StormDecision{State: active, Suspended: true}},
		{"storm ends: cooldown starts", active, false, t0, StormDecision{State: ended, Suspended: true, ResumeAt: t0.Add(cooldown)}},
		{"cooling down", ended, false, t0.Add(time.Minute), StormDecision{State: ended, Suspended: true, ResumeAt: t0.Add(cooldown)}},
		{"storm returns during cooldown", ended, true, t0.Add(time.Minute), StormDecision{State: active, Suspended: true}},
		{"cooldown over", ended, false, t0.Add(cooldown), StormDecision{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NextStormState(tt.prev, tt.storming, tt.now, cooldown); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestChooseMethod(t *testing.T) {
	tests := []struct {
		method       v1alpha1.RecoveryMethod
		major, minor int
		want         v1alpha1.RecoveryMethod
	}{
		{v1alpha1.RecoveryMethodAuto, 1, 28, v1alpha1.RecoveryMethodOutOfServiceTaint},
		{v1alpha1.RecoveryMethodAuto, 1, 37, v1alpha1.RecoveryMethodOutOfServiceTaint},
		{v1alpha1.RecoveryMethodAuto, 2, 0, v1alpha1.RecoveryMethodOutOfServiceTaint},
		{v1alpha1.RecoveryMethodAuto, 1, 27, v1alpha1.RecoveryMethodForceDelete},
		{v1alpha1.RecoveryMethodAuto, 0, 0, ""}, // unknown version: no guess
		{"", 0, 0, ""},
		{v1alpha1.RecoveryMethodForceDelete, 0, 0, v1alpha1.RecoveryMethodForceDelete},
		{"", 1, 30, v1alpha1.RecoveryMethodOutOfServiceTaint},
		{v1alpha1.RecoveryMethodForceDelete, 1, 30, v1alpha1.RecoveryMethodForceDelete},
		{v1alpha1.RecoveryMethodOutOfServiceTaint, 1, 20, v1alpha1.RecoveryMethodOutOfServiceTaint},
	}
	for _, tt := range tests {
		if got := ChooseMethod(tt.method, tt.major, tt.minor); got != tt.want {
			t.Errorf("ChooseMethod(%q, %d, %d) = %q, want %q", tt.method, tt.major, tt.minor, got, tt.want)
		}
	}
}
