// Package nodecond answers "is this Node Ready?" once for every package:
// node recovery, capacity, rebalance and the member cache all ask it, and a
// node must never be Ready to one of them and not Ready to another.
package nodecond

import corev1 "k8s.io/api/core/v1"

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
