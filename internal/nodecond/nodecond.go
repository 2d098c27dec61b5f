// Package nodecond answers "is this Node Ready?" once for every package:
// node recovery, capacity, rebalance and the member cache all ask it, and a
// node must never be Ready to one of them and not Ready to another.
package nodecond

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Ready returns the node's Ready condition, nil when the node is nil or
// reports none.
func Ready(node *corev1.Node) *corev1.NodeCondition {
	if node == nil {
		return nil
	}
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			return &node.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the node has a Ready condition with status True.
// A node without one is not Ready: nothing may be scheduled on or counted
// for it.
func IsReady(node *corev1.Node) bool {
	c := Ready(node)
	return c != nil && c.Status == corev1.ConditionTrue
}

// SameLoss reports whether cur, a not-Ready Ready condition, continues the
// loss last seen with status prev and transition time prevSince. Only
// equality of the member's own values is used, never a clock: an unchanged
// condition continues it; a False to Unknown flip (the node lifecycle
// controller taking over from a kubelet that stopped posting) continues it
// too. Any other change needs a running kubelet (it posted True, or False
// again) and ends it, even if no one saw the node Ready in between.
func SameLoss(prev corev1.ConditionStatus, prevSince time.Time, cur *corev1.NodeCondition) bool {
	if cur == nil || cur.Status == corev1.ConditionTrue {
		return false
	}
	if cur.Status == prev && cur.LastTransitionTime.Time.Equal(prevSince) {
		return true
	}
	return prev == corev1.ConditionFalse && cur.Status == corev1.ConditionUnknown
}
