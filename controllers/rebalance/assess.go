package rebalance

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/planner"
	"github.com/fedfailover/fedfailover/internal/wake"
)

// observation is what the controller saw of one member for one workload.
type observation struct {
	// Healthy: connected and Ready in kubefed.
	Healthy bool
	// KubefedReady is kubefed's own verdict (Ready, current or stale); with
	// Healthy false it means only fedfailover sees the member failing, and
	// the member is never Failed for that alone.
	KubefedReady bool
	// Unknown: kubefed reports the member Ready and fedfailover's own view
	// proves nothing (member.Cache.Unknown: never connected by this
	// process, or its cache still syncing): it keeps what it holds.
	Unknown bool
	// Running counts the workload's Running, Ready, non-terminating pods.
	Running int64
	// Fits is capacity.Fit's estimate for the workload's pod template.
	Fits int64
	// Placed counts the workload's pods of every revision bound to a node
	// and not finished (workloadPods); -1: not known (a summary of an older
	// version), no prediction is made.
	Placed int64
	// Unschedulable: some pod of the workload, not being deleted, is
	// Unschedulable. Only that it is, never since when: the member's
	// timestamp is on the member's clock (capacityExhaustedAfter counts
	// from fedfailover's first sighting, MemberTimers.UnschedulableSince).
	Unschedulable bool
	// Assigned is the member workload's replicas (what kubefed gave it),
	// -1 when the member has none; AssignedObserved: its controller has
	// seen them. A release breaks only once kubefed gave every member what
	// the RSP now assigns it (planner.ReleaseInput).
	Assigned         int64
	AssignedObserved bool
	// Draining: an accepted MemberMaintenance names the member (host-side,
	// fedfailover's own status): its replicas move off it, and its room
	// counts only from the first pass after the maintenance ends.
	Draining bool
}

// assessment is a member's planner input, its updated marks, and when the
// state may change with time alone.
type assessment struct {
	Member    planner.Member
	Marks     contract.MemberTimers
	RequeueAt time.Time
	// Since is the onset of a Failed or Exhausted state (for the metric).
	Since time.Time
	// BackedOff: the member ran out of capacity right after a failback;
	// its backoff level was raised (event and metric).
	BackedOff bool
}

// assess turns an observation into a member state, with hysteresis: a
// member fails only after clusterFailedAfter of continuous bad health, is
// exhausted only after capacityExhaustedAfter of Unschedulable pods, and
// its room counts only from the first healthy observation with room after
// the last bad one (the planner waits stabilizationWindow from there).
func assess(obs observation, prev contract.MemberTimers, spec v1alpha1.RebalanceSpec, now time.Time) assessment {
	a := assessHealth(obs, prev, spec, now)
	a.Member.Draining = obs.Draining
	a.Marks.LastFailback, a.Marks.Backoff, a.BackedOff = failbackBackoff(prev, a.Member.State, spec, now)
	a.Member.Backoff = a.Marks.Backoff
	if a.Marks.LastFailback != nil {
		a.RequeueAt = wake.Earliest(a.RequeueAt, probationEnd(prev, spec))
	}
	return a
}

// maxBackoff caps the failback backoff level (planner.BackedOffWindow also
// caps the window itself).
const maxBackoff = 8

// failbackBackoff is the no-oscillation rule: a member that runs out of
// capacity while on probation after a failback (its room was
// overestimated: anti-affinity, topology spread, ...) gets one more
// backoff level, so its next failback waits twice as long; a member that
// passes its probation (its backed-off stabilization window after the
// failback) without that starts again from level 0.
func failbackBackoff(prev contract.MemberTimers, state planner.MemberState, spec v1alpha1.RebalanceSpec, now time.Time) (*metav1.Time, int, bool) {
	switch {
	case prev.LastFailback == nil:
		return nil, prev.Backoff, false
	case state == planner.Exhausted:
		return nil, min(prev.Backoff+1, maxBackoff), true
	case !now.Before(probationEnd(prev, spec)):
		return nil, 0, false
	}
	return prev.LastFailback, prev.Backoff, false
}

// probationEnd is when a failback to the member counts as having held.
func probationEnd(prev contract.MemberTimers, spec v1alpha1.RebalanceSpec) time.Time {
	return timeOf(prev.LastFailback).Add(planner.BackedOffWindow(spec.Failback.StabilizationWindow.Get(), prev.Backoff))
}

// assessHealth is assess without the failback backoff.
func assessHealth(obs observation, prev contract.MemberTimers, spec v1alpha1.RebalanceSpec, now time.Time) assessment {
	var a assessment
	if obs.Unknown {
		a.Member = planner.Member{State: planner.Healthy, KubefedReady: true, Unobserved: true}
		return a
	}
	if !obs.Healthy {
		since := timeOf(prev.FailingSince)
		if since.IsZero() {
			since = now
		}
		a.Marks = contract.MemberTimers{FailingSince: timePtr(since)}
		failAt := timeOf(a.Marks.FailingSince).Add(spec.ClusterFailedAfter.Get())
		if now.Before(failAt) {
			// Not failed yet: it keeps what it holds (no room, nothing
			// known), and the federation guard counts it as failing.
			a.Member = planner.Member{State: planner.Healthy, KubefedReady: obs.KubefedReady, Unobserved: true, Failing: true}
			a.RequeueAt = failAt
			return a
		}
		if obs.KubefedReady {
			// Failed to fedfailover alone: kubefed does not confirm it.
			// It keeps what it holds and counts as failing for the guard;
			// it is Failed at the pass that sees kubefed agree (a Ready
			// flip queues one), its onset still fedfailover's own sighting.
			a.Member = planner.Member{State: planner.Healthy, KubefedReady: true, Unobserved: true, Failing: true, Unconfirmed: true}
			return a
		}
		a.Member = planner.Member{State: planner.Failed}
		a.Since = timeOf(a.Marks.FailingSince)
		return a
	}
	a.Member = planner.Member{State: planner.Healthy, Running: obs.Running, Fits: max(obs.Fits, 0), Placed: obs.Placed, KubefedReady: true}
	if obs.Unschedulable {
		since := microOf(prev.UnschedulableSince)
		if since.IsZero() {
			since = now.Truncate(time.Microsecond)
		}
		a.Marks.UnschedulableSince = microPtr(since)
		exhaustAt := since.Add(spec.CapacityExhaustedAfter.Get())
		if now.Before(exhaustAt) {
			a.RequeueAt = exhaustAt
		} else {
			a.Member.State = planner.Exhausted
			a.Since = since
			return a // no room while pods cannot be scheduled
		}
	}
	if obs.Fits > 0 && !obs.Unschedulable && !obs.Draining {
		since := timeOf(prev.RoomSince)
		if since.IsZero() {
			since = now
		}
		a.Marks.RoomSince = timePtr(since)
		a.Member.RoomSince = timeOf(a.Marks.RoomSince)
	}
	return a
}

// anyUnschedulable: some pod not being deleted and not bound to a node is
// Unschedulable.
func anyUnschedulable(pods []*cachedpod.Pod) bool {
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.NodeName != "" {
			continue
		}
		if c := p.Condition(corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// runningPods counts pods that run, are Ready and are not being deleted:
// make-before-break shrinks the others only once these serve.
func runningPods(pods []*cachedpod.Pod) int64 {
	var n int64
	for _, p := range pods {
		if p.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		if c := p.Condition(corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
			n++
		}
	}
	return n
}
