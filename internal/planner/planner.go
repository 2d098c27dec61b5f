// Package planner computes, without any client or clock, the kubefed
// ReplicaSchedulingPreference placement that keeps a federated workload's
// replicas on members that can run them, and brings it back to the user's
// baseline without flapping once members recover.
package planner

import (
	"slices"
	"time"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// MemberState is a member's health for one workload.
type MemberState string

// Member states.
const (
	// Healthy: connected, Ready in kubefed, and not out of capacity.
	Healthy MemberState = "Healthy"
	// Failed: disconnected or not Ready for clusterFailedAfter.
	Failed MemberState = "Failed"
	// Exhausted: the workload's pods Unschedulable for capacityExhaustedAfter.
	Exhausted MemberState = "Exhausted"
)

// Member is what the planner knows of one member cluster for one workload.
type Member struct {
	State MemberState
	// Running is how many of the workload's replicas run there now.
	Running int64
	// Fits is how many more replicas fit there (capacity.Fit).
	Fits int64
	// Placed is how many of the workload's replicas are bound to a node
	// there and not finished, of every revision, terminating ones
	// included: the room they hold is the workload's whatever their state
	// (a rollout's old pods free it for its new ones). Below zero: not
	// known, and no prediction is made for the member.
	Placed int64
	// RoomSince is since when the member has been Healthy with room; zero
	// when it is not. Failback waits for it to be stabilizationWindow old.
	RoomSince time.Time
	// KubefedReady is kubefed's own health verdict of the member (its last
	// one, current or not). A member fedfailover alone sees failing is never
	// Failed while kubefed reports it Ready: the planner reads such a
	// member as Unconfirmed, whatever State says.
	KubefedReady bool
	// Unconfirmed: fedfailover's own view (its connection, probes, reads)
	// has failed for clusterFailedAfter, but kubefed does not confirm the
	// failure (it reports the member Ready, or its report is stale). The
	// member is not Failed: it keeps what it holds (Unobserved), and the
	// federation guard counts it as failing (Failing). Nothing is moved off
	// it until kubefed agrees: fedfailover's own view alone must never
	// make things worse than kubefed alone.
	Unconfirmed bool
	// Backoff is the member's failback backoff level: its failback waits
	// the stabilization window doubled Backoff times (capped).
	Backoff int
	// Unobserved: fedfailover's own view says nothing about the member yet
	// (its cache still syncing, or unreadable and not failed yet). It
	// keeps what it holds, and the federation guard counts that as
	// runnable: kubefed keeps it there.
	Unobserved bool
	// Draining: an accepted MemberMaintenance names the member. Its
	// replicas move to the others make before break, as fast as they have
	// room and their new replicas are Ready (drain.go); what fits nowhere
	// else stays. A draining member that is Unobserved keeps what it holds.
	Draining bool
	// Failing: fedfailover's own probes or reads fail for the member now,
	// but clusterFailedAfter has not passed yet (State is not Failed).
	// Only the federation guard reads it: members failing apart (one
	// Failed, the others still on their way) are one failure of the
	// federation, not a failure of one member with the rest healthy.
	Failing bool
}

// Input is everything one planning decision depends on.
type Input struct {
	// Baseline is spec.clusters as the user wrote it.
	Baseline map[string]fedschedv1a1.ClusterPreferences
	// TotalReplicas is the user's spec.totalReplicas.
	TotalReplicas int32
	// Members holds every member cluster kubefed may place replicas on.
	// Clusters named only in Baseline/Current are left as the baseline has them.
	Members map[string]Member
	// Current is the RSP's spec.clusters now (baseline or a plan of ours).
	Current map[string]fedschedv1a1.ClusterPreferences
	// CurrentTotalReplicas is the RSP's spec.totalReplicas now; it is above
	// TotalReplicas during a make-before-break step. Zero means TotalReplicas.
	CurrentTotalReplicas int32
	// Eligible, when not nil, holds the members the target's own placement
	// lets kubefed use (its clusterSelector, with the RSP's
	// intersectWithClusterSelector); the others are given nothing.
	Eligible map[string]bool
	// Assigned is as in ReleaseInput: per member read, the replicas its
	// workload has now. The break of a drain step waits until every member
	// read has what Current assigns it; nil: not known, no wait.
	Assigned map[string]int64
	// LastChange is when the planner's last change was written (zero: never).
	LastChange time.Time
	Now        time.Time
	Spec       v1alpha1.RebalanceSpec
}

// Reasons for a plan (CamelCase, for events, status and metrics).
const (
	ReasonMemberFailed      = "MemberFailed"
	ReasonCapacityExhausted = "CapacityExhausted"
	// ReasonCapacityPredicted: the capacity estimate says a member cannot
	// hold what the RSP assigns it (predictive placement).
	ReasonCapacityPredicted    = "CapacityPredicted"
	ReasonTotalChanged         = "TotalReplicasChanged"
	ReasonInsufficientCapacity = "InsufficientCapacity"
	ReasonFailback             = "Failback"
	ReasonFailbackMake         = "FailbackMakeBeforeBreak"
	ReasonFailbackBreak        = "FailbackBreak"
	ReasonWaitingForReplicas   = "WaitingForReplicas"
	ReasonMinInterval          = "WaitingForMinInterval"
	ReasonStabilizing          = "Stabilizing"
	ReasonBalanced             = "Balanced"
	ReasonNoMembers            = "NoMembers"
	// ReasonTooManyMembersFailed: the federation guard holds every shift.
	ReasonTooManyMembersFailed = "TooManyMembersFailed"
	// ReasonNoCapacityAnywhere: the plan would leave no replica runnable;
	// what kubefed has is kept.
	ReasonNoCapacityAnywhere = "NoCapacityAnywhere"
	// ReasonMembersUnobserved: no room is known, but members fedfailover
	// cannot see yet hold replicas: what kubefed has is kept, and that is
	// no suspension (every RSP read NoCapacityAnywhere while the members'
	// caches synced at startup).
	ReasonMembersUnobserved = "MembersUnobserved"
	// ReasonMemberUnreachable: replicas left members that only fedfailover
	// saw failed (kubefed reported them Ready). No longer produced: such a
	// member is Unconfirmed and keeps what it holds; the constant stays for
	// the decisions older versions recorded.
	ReasonMemberUnreachable = "MemberUnreachable"
	// ReasonDrainMake raises the other members for a member under
	// maintenance (make), ReasonDrainBreak lowers the member once their
	// new replicas are Ready (break), ReasonDrainWaitingForRoom: nothing
	// can move off it now.
	ReasonDrainMake           = "MaintenanceMakeBeforeBreak"
	ReasonDrainBreak          = "MaintenanceBreak"
	ReasonDrainWaitingForRoom = "MaintenanceWaitingForRoom"
)

// Result is the plan to write to the RSP.
type Result struct {
	// Clusters is the new spec.clusters.
	Clusters map[string]fedschedv1a1.ClusterPreferences
	// TotalReplicas is the new spec.totalReplicas.
	TotalReplicas int32
	// TemporaryTotal is true when TotalReplicas is raised above the user's
	// value for a make-before-break step.
	TemporaryTotal bool
	// Shifted is true when Clusters is not the baseline.
	Shifted bool
	// Placement is the replicas per member that Clusters asks for.
	Placement map[string]int64
	// Unplaced counts replicas beyond the known room of the federation.
	Unplaced int64
	Reason   string
	// Changed is true when Clusters or TotalReplicas differ from the RSP now.
	Changed bool
	// RequeueAt is when planning again may give another result (zero: only
	// when inputs change).
	RequeueAt time.Time
	// FailedBack lists the members a failback step gives replicas back to.
	FailedBack []string
}

// Plan decides the next placement. Rules, in order:
//  1. a failed member holding replicas: move them now (ignores minInterval);
//  2. at most one change per minInterval otherwise;
//  3. an exhausted member over its room, a member assigned more than the
//     capacity estimate says it can hold (predictive placement), or fewer
//     replicas placed than totalReplicas: jump to the ideal placement;
//  4. during make-before-break, shrink the others once the raised replicas run;
//  5. otherwise step toward the ideal by at most maxStep replicas (failback).
//
// A member under maintenance (Draining) is given nothing in the ideal but
// what fits nowhere else; its replicas leave it only make before break
// (drain.go): a jump to the ideal never lowers it at once.
//
// The ideal placement spreads totalReplicas by baseline weights over members
// that are not failed, caps exhausted members at running+fits, keeps members
// that have not been healthy with room for stabilizationWindow at what they
// hold, and spills what is left to members with room.
func Plan(in Input) Result {
	p := newPlanning(in)
	if len(p.names) == 0 {
		return p.keep(ReasonNoMembers, time.Time{})
	}
	if p.tooManyFailed() {
		return p.keep(ReasonTooManyMembersFailed, time.Time{})
	}
	if p.total > 0 && p.runnable(p.ideal) == 0 {
		if p.unobservedHold() {
			return p.keep(ReasonMembersUnobserved, time.Time{})
		}
		return p.keep(ReasonNoCapacityAnywhere, time.Time{})
	}
	switch {
	case p.failedHoldsReplicas():
		return p.jump(p.ideal, ReasonMemberFailed)
	case p.now.Before(p.lastChange.Add(p.minInterval)):
		if p.settled() {
			return p.keep(p.settledReason())
		}
		return p.keep(ReasonMinInterval, p.lastChange.Add(p.minInterval))
	case p.hasDeficit():
		if equalPlacement(p.ideal, p.current) {
			return p.keep(ReasonInsufficientCapacity, time.Time{})
		}
		return p.jump(p.ideal, p.deficitReason())
	case p.currentTotal > p.total && p.anyDraining():
		return p.drainBreak()
	case p.currentTotal > p.total:
		return p.shrinkToTotal()
	case !equalPlacement(p.ideal, p.current) && p.anyDraining():
		return p.drainStep()
	case !equalPlacement(p.ideal, p.current):
		return p.failbackStep()
	}
	reason, requeue := p.settledReason()
	r := p.result(p.current, p.total, reason)
	r.RequeueAt = requeue
	return r
}

// planning holds the derived values of one Plan call.
type planning struct {
	in                        Input
	names                     []string
	total, currentTotal       int64
	now, lastChange           time.Time
	minInterval, window       time.Duration
	maxStep                   int64
	current, ideal, baselined map[string]int64
	unplaced                  int64
	// baseline and currentPrefs are the preferences as kubefed reads
	// them (empty: "*" weight 1).
	baseline, currentPrefs map[string]fedschedv1a1.ClusterPreferences
}

func newPlanning(in Input) *planning {
	in.Members = unconfirmed(in.Members)
	p := &planning{
		in:          in,
		total:       max(int64(in.TotalReplicas), 0),
		now:         in.Now,
		lastChange:  in.LastChange,
		minInterval: in.Spec.MinInterval.Get(),
		window:      in.Spec.Failback.StabilizationWindow.Get(),
		maxStep:     max(int64(in.Spec.Failback.MaxStep), 1),
	}
	p.currentTotal = p.total
	if in.CurrentTotalReplicas > 0 {
		p.currentTotal = int64(in.CurrentTotalReplicas)
	}
	for name := range in.Members {
		if name != Wildcard {
			p.names = append(p.names, name)
		}
	}
	slices.Sort(p.names)
	p.baseline, p.currentPrefs = withKubefedDefault(in.Baseline), withKubefedDefault(in.Current)
	p.current = distribute(p.currentTotal, p.names, func(n string) bounds { return p.placeable(p.currentPrefs, n) })
	p.baselined = distribute(p.total, p.names, func(n string) bounds { return p.placeable(p.baseline, n) })
	p.ideal, p.unplaced = p.idealPlacement()
	return p
}

func (p *planning) member(n string) Member { return p.in.Members[n] }

func (p *planning) failed(n string) bool { return p.member(n).State == Failed }

// room is how many of the workload's replicas the member could hold.
func (p *planning) room(n string) int64 {
	m := p.member(n)
	return max(m.Running, 0) + min(max(m.Fits, 0), maxWeight)
}

// stable: healthy with room for at least its stabilization window.
func (p *planning) stable(n string) bool {
	m := p.member(n)
	return m.State == Healthy && !m.RoomSince.IsZero() && !p.now.Before(m.RoomSince.Add(p.windowOf(n)))
}

// maxBackoffWindow caps a backed-off stabilization window (never below
// the policy's own window).
const maxBackoffWindow = time.Hour

// windowOf is the member's stabilization window: the policy's, doubled
// per backoff level (a member that ran out of capacity right after its
// last failbacks, its room overestimated), up to maxBackoffWindow.
func (p *planning) windowOf(n string) time.Duration {
	return BackedOffWindow(p.window, p.member(n).Backoff)
}

// BackedOffWindow is window doubled level times, capped at
// maxBackoffWindow (or window itself when that is longer).
func BackedOffWindow(window time.Duration, level int) time.Duration {
	limit := max(window, maxBackoffWindow)
	for range min(max(level, 0), 32) {
		window *= 2
		if window >= limit {
			return limit
		}
	}
	return window
}

func (p *planning) available() []string {
	var out []string
	for _, n := range p.names {
		if !p.failed(n) {
			out = append(out, n)
		}
	}
	return out
}

func (p *planning) failedHoldsReplicas() bool {
	for _, n := range p.names {
		if p.failed(n) && p.current[n] > 0 {
			return true
		}
	}
	return false
}

// hasDeficit: an exhausted member holds more than its room, a member is
// assigned more than it is predicted to hold, or the members that are not
// failed hold fewer than totalReplicas.
func (p *planning) hasDeficit() bool {
	var held int64
	for _, n := range p.available() {
		held += p.holdable(n)
	}
	return held < p.total
}

// holdable is how many of the replicas the RSP now assigns the member it
// can run: all of them, but no more than its room when it is exhausted or
// predicted short.
func (p *planning) holdable(n string) int64 {
	switch {
	case p.member(n).State == Exhausted:
		return min(p.current[n], p.room(n))
	case p.predictsShortfall(n):
		return min(p.current[n], p.predictedRoom(n))
	}
	return p.current[n]
}

func (p *planning) deficitReason() string {
	for _, n := range p.available() {
		if p.member(n).State == Exhausted && p.current[n] > p.room(n) {
			return ReasonCapacityExhausted
		}
	}
	for _, n := range p.available() {
		if p.predictsShortfall(n) {
			return ReasonCapacityPredicted
		}
	}
	return ReasonTotalChanged
}

// predictedRoom is how many of the workload's replicas the member can hold
// by the capacity estimate: those bound there now and what fits besides.
func (p *planning) predictedRoom(n string) int64 {
	m := p.member(n)
	return max(m.Placed, m.Running, 0) + min(max(m.Fits, 0), maxWeight)
}

// predictsShortfall: with predictive placement, the capacity estimate says
// the member cannot hold what the RSP now assigns it, so the rest would
// pend there. Only for a member fedfailover reads now (Healthy, observed,
// Placed known) and that is not draining (a drain keeps its own pace). A
// cap at predictedRoom never takes a bound replica away: only replicas
// that have no node yet, or none at all, go elsewhere.
func (p *planning) predictsShortfall(n string) bool {
	m := p.member(n)
	return p.in.Spec.Predictive() && m.State == Healthy && !m.Unobserved && !m.Draining &&
		m.Placed >= 0 && p.current[n] > p.predictedRoom(n)
}

// settled: nothing to move and totalReplicas as the user wants it.
func (p *planning) settled() bool {
	return equalPlacement(p.ideal, p.current) && p.currentTotal == p.total
}

// settledReason explains a placement with nothing to do, and when a member
// still stabilizing may change that.
func (p *planning) settledReason() (string, time.Time) {
	if p.unplaced > 0 {
		return ReasonInsufficientCapacity, time.Time{}
	}
	var next time.Time
	for _, n := range p.names {
		m := p.member(n)
		if m.State != Healthy || m.RoomSince.IsZero() || p.stable(n) || p.current[n] >= p.baselined[n] {
			continue
		}
		if at := m.RoomSince.Add(p.windowOf(n)); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	if !next.IsZero() {
		return ReasonStabilizing, next
	}
	for _, n := range p.names {
		if p.drains(n) && p.current[n] > 0 {
			return ReasonDrainWaitingForRoom, time.Time{}
		}
	}
	return ReasonBalanced, time.Time{}
}
