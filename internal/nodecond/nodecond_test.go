package nodecond

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsReady(t *testing.T) {
	node := func(conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := func(s corev1.ConditionStatus) corev1.NodeCondition {
		return corev1.NodeCondition{Type: corev1.NodeReady, Status: s}
	}
	pressure := corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue}
	for _, tc := range []struct {
		name string
		node *corev1.Node
		want bool
	}{
		{"nil node", nil, false},
		{"no conditions", node(), false},
		{"only other conditions", node(pressure), false},
		{"Ready=True", node(pressure, ready(corev1.ConditionTrue)), true},
		{"Ready=False", node(ready(corev1.ConditionFalse)), false},
		{"Ready=Unknown", node(ready(corev1.ConditionUnknown)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsReady(tc.node); got != tc.want {
				t.Fatalf("IsReady = %v, want %v", got, tc.want)
			}
			if c := Ready(tc.node); tc.want && (c == nil || c.Type != corev1.NodeReady) {
				t.Fatalf("Ready() = %v, want the Ready condition", c)
			}
		})
	}
}

func TestSameLoss(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	cond := func(s corev1.ConditionStatus, at time.Time) *corev1.NodeCondition {
		return &corev1.NodeCondition{Type: corev1.NodeReady, Status: s, LastTransitionTime: metav1.NewTime(at)}
	}
	for _, tc := range []struct {
		name string
		prev corev1.ConditionStatus
		cur  *corev1.NodeCondition
		want bool
	}{
		{"unchanged Unknown", corev1.ConditionUnknown, cond(corev1.ConditionUnknown, t0), true},
		{"unchanged False", corev1.ConditionFalse, cond(corev1.ConditionFalse, t0), true},
		{"False to Unknown: the kubelet stopped", corev1.ConditionFalse, cond(corev1.ConditionUnknown, t1), true},
		{"Unknown to False: a kubelet posted", corev1.ConditionUnknown, cond(corev1.ConditionFalse, t1), false},
		{"new Unknown spell: it was back in between", corev1.ConditionUnknown, cond(corev1.ConditionUnknown, t1), false},
		{"new False spell", corev1.ConditionFalse, cond(corev1.ConditionFalse, t1), false},
		{"Ready", corev1.ConditionUnknown, cond(corev1.ConditionTrue, t1), false},
		{"no condition", corev1.ConditionUnknown, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameLoss(tc.prev, t0, tc.cur); got != tc.want {
				t.Fatalf("SameLoss = %v, want %v", got, tc.want)
			}
		})
	}
}
