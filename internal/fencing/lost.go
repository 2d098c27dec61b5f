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

// NewestMemberTime is the latest time the member itself recorded for the
// Node, on the member's own clocks: its API server's time of the last
// change by each field manager (metadata.managedFields[].time, which the
// write of an annotation updates), the Node's creation, and the Ready
// condition's heartbeat and transition. A fence mark on the Node dated
// later than this was not written when it says: it is from the future.
// Zero for a nil Node or one without any of these times.
func NewestMemberTime(node *corev1.Node) time.Time {
	if node == nil {
		return time.Time{}
	}
	newest := node.CreationTimestamp.Time
	later := func(t time.Time) {
		if t.After(newest) {
			newest = t
		}
	}
	for i := range node.ManagedFields {
		if t := node.ManagedFields[i].Time; t != nil {
			later(t.Time)
		}
	}
	if ready := nodecond.Ready(node); ready != nil {
		later(ready.LastHeartbeatTime.Time)
		later(ready.LastTransitionTime.Time)
	}
	return newest
}
