package nodecond

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
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
