// Package fencing holds the pure decisions of node recovery: when a node is
// lost, whether it is proven to be off (fenced), whether a member is in a
// failure storm, and which recovery method to use. Nothing here talks to an
// API server or reads a clock: callers pass in the objects and the time.
package fencing

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// Lost reports whether node has had a Ready condition other than True for at
// least notReadyFor, and since when (the condition's lastTransitionTime).
//
// A node without a Ready condition, or whose Ready condition has no
// lastTransitionTime, is never lost: we cannot tell for how long it has been
// unhealthy, and the node lifecycle controller gives every node that stops
// reporting a Ready=Unknown condition with a transition time, so such a node
// becomes measurable soon. A nil node is not lost either: deleted nodes are
// handled by the caller from its durable lost-since mark.
func Lost(node *corev1.Node, notReadyFor time.Duration, now time.Time) (lost bool, since time.Time) {
	ready := nodecond.Ready(node)
	if ready == nil || ready.Status == corev1.ConditionTrue || ready.LastTransitionTime.IsZero() {
		return false, time.Time{}
	}
	since = ready.LastTransitionTime.Time
	return !now.Before(since.Add(notReadyFor)), since
}

// NotReadySince is when the node's Ready condition last left True; zero when
// the node is Ready or reports no Ready condition.
func NotReadySince(node *corev1.Node) time.Time {
	ready := nodecond.Ready(node)
	if ready == nil || ready.Status == corev1.ConditionTrue {
		return time.Time{}
	}
	return ready.LastTransitionTime.Time
}
