package planner

import (
	"time"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// A release gives an RSP that no policy manages any more back to the
// user's baseline, but only where kubefed alone would put replicas now,
// and stepwise where replicas move back (docs/rebalance.md, Release):
//   - a member kubefed reports not Ready, one fedfailover cannot read, one
//     whose replicas are Unschedulable or without room for its baseline
//     share keeps what it holds now (its pin): the members carrying its
//     share keep carrying it;
//   - replicas move back to a member at most maxStep at a time, make before
//     break: totalReplicas is raised by the step, and the members carrying
//     them shrink only once the Ready replicas after the shrink are still
//     at least the user's total (or what was Ready before, if less);
//   - once every member holds its baseline share and totalReplicas is the
//     user's, the user's own spec is written back and the release is done.
//
// Unlike a failback under a policy, a release has no clock: no
// stabilization window, no minInterval. The policy that set those is gone,
// and a member is given its share back only once its replicas are Ready.

// ReleaseInput is what one release decision depends on.
type ReleaseInput struct {
	// Baseline and TotalReplicas are the user's spec.
	Baseline      map[string]fedschedv1a1.ClusterPreferences
	TotalReplicas int32
	// Current and CurrentTotalReplicas are the RSP's spec now.
	Current              map[string]fedschedv1a1.ClusterPreferences
	CurrentTotalReplicas int32
	// Members are the members kubefed may place replicas on, as seen now:
	// Failed when kubefed reports them not Ready, Unobserved when
	// fedfailover cannot read them (kubefed Ready), Exhausted when some
	// replica of the workload is Unschedulable there now, else Healthy with
	// Running (Ready) replicas and Fits more (the planner's capacity
	// estimate). RoomSince, Backoff and Failing are not read.
	Members map[string]Member
	// Eligible is as in Input.
	Eligible map[string]bool
	// MaxStep is the most replicas moved back per step (at least 1).
	MaxStep int32
	// Assigned is, per member fedfailover reads, the replicas its workload
	// has now (what kubefed gave it, seen by the workload's controller);
	// a member absent is not known. The break of a step waits until every
	// member read has what Current assigns it: before that, its Ready pods
	// may be ones kubefed is about to remove (a member back from a failure
	// still runs the replicas it had before it failed).
	Assigned map[string]int64
}

// Why a member does not hold its baseline share yet.
const (
	WaitNotReady      = "NotReadyInKubefed"
	WaitUnobserved    = "Unobserved"
	WaitUnschedulable = "Unschedulable"
	WaitNoRoom        = "NoRoom"
	WaitReplicas      = "ReplicasNotReady"
	WaitKubefed       = "KubefedSyncing"
)

// Release reasons (Result.Reason of a release).
const (
	// ReasonReleaseStep raises the members below their share (make).
	ReasonReleaseStep = "ReleaseStep"
	// ReasonReleaseBreak shrinks the members that carried them (break).
	ReasonReleaseBreak = "ReleaseBreak"
	// ReasonReleaseWaiting: nothing can move now.
	ReasonReleaseWaiting = "ReleaseWaiting"
	// ReasonReleased: the baseline is written back, the release is done.
	ReasonReleased = "Released"
)

// ReleaseWait is one member kept from its baseline share, and why.
type ReleaseWait struct {
	Member string
	// Reason is one of the Wait* constants.
	Reason string
	// Has is what the member is given now, Share its baseline share,
	// Ready its Ready replicas, Fits how many more fit there.
	Has, Share, Ready, Fits int64
}

// ReleaseResult is the next write of a release.
type ReleaseResult struct {
	Result
	// Done: Clusters and TotalReplicas are the user's own spec; once
	// written, the release is complete.
	Done bool
	// Waiting lists the members kept below their baseline share, or whose
	// replicas moved so far are not Ready yet.
	Waiting []ReleaseWait
	// StepsLeft is how many make-before-break steps are still to come,
	// after this result, at maxStep each (members waiting included).
	StepsLeft int
}

// releaseEpoch stands in for a clock: a release reads none.
var releaseEpoch = time.Unix(0, 0).UTC()

// Release decides the next write of a release (see above).
func Release(in ReleaseInput) ReleaseResult {
	members := make(map[string]Member, len(in.Members))
	for n, m := range in.Members {
		// No stabilization window: a healthy member with room is stable now.
		m.RoomSince, m.Failing, m.Backoff = time.Time{}, false, 0
		if m.State == Healthy && !m.Unobserved && m.Fits > 0 {
			m.RoomSince = releaseEpoch
		}
		switch m.State {
		case Failed:
			m.KubefedReady = false // Failed here is kubefed's own verdict
		case Exhausted:
			m.Fits = 0 // replicas Unschedulable now: no room now, whatever the estimate
		}
		members[n] = m
	}
	p := newPlanning(Input{Baseline: in.Baseline, TotalReplicas: in.TotalReplicas, Members: members,
		Current: in.Current, CurrentTotalReplicas: in.CurrentTotalReplicas, Eligible: in.Eligible, Now: releaseEpoch,
		Spec: v1alpha1.RebalanceSpec{Failback: v1alpha1.FailbackSpec{MaxStep: max(in.MaxStep, 1), MakeBeforeBreak: true}}})
	out := p.releaseStep(in.Assigned)
	out.Waiting = p.releaseWaits(out.Placement, int64(out.TotalReplicas), in.Assigned)
	out.StepsLeft = p.stepsLeft(out.Placement)
	out.RequeueAt = time.Time{}
	return out
}

func (p *planning) releaseStep(assigned map[string]int64) ReleaseResult {
	switch {
	case len(p.names) == 0 || (equalPlacement(p.current, p.baselined) && p.currentTotal == p.total):
		return p.released()
	case p.tooManyFailed():
		return ReleaseResult{Result: p.keep(ReasonTooManyMembersFailed, time.Time{})}
	case p.total > 0 && p.runnable(p.ideal) == 0:
		if p.unobservedHold() {
			return ReleaseResult{Result: p.keep(ReasonMembersUnobserved, time.Time{})}
		}
		return ReleaseResult{Result: p.keep(ReasonNoCapacityAnywhere, time.Time{})}
	case p.failedHoldsReplicas():
		// A member kubefed reports not Ready holds replicas of a step: what
		// kubefed alone would do, move them, within the room elsewhere.
		return ReleaseResult{Result: p.result(p.ideal, p.total, ReasonMemberFailed)}
	case p.currentTotal > p.total:
		return p.releaseBreak(assigned)
	case p.hasDeficit():
		if equalPlacement(p.ideal, p.current) {
			return ReleaseResult{Result: p.keep(ReasonInsufficientCapacity, time.Time{})}
		}
		return ReleaseResult{Result: p.result(p.ideal, p.total, p.deficitReason())}
	case !equalPlacement(p.ideal, p.current):
		next := clone(p.current)
		if step := p.moveUp(next, p.maxStep); step > 0 {
			r := p.result(next, p.total+step, ReasonReleaseStep)
			r.FailedBack = p.filter(p.names, func(n string) bool { return next[n] > p.current[n] })
			return ReleaseResult{Result: r}
		}
	}
	return ReleaseResult{Result: p.keep(ReasonReleaseWaiting, time.Time{})}
}

// released writes the user's own spec back.
func (p *planning) released() ReleaseResult {
	r := Result{Clusters: copyPrefs(p.in.Baseline), TotalReplicas: p.in.TotalReplicas, Placement: fill(clone(p.baselined), p.names),
		Reason: ReasonReleased}
	r.Changed = !contract.EqualPreferences(r.Clusters, p.in.Current) || p.total != p.currentTotal
	return ReleaseResult{Result: r, Done: true}
}

// releaseBreak ends a make-before-break step: the members above their
// target give back the extra replicas, once the Ready replicas left after
// that are at least the user's total (or all that are Ready now, if fewer:
// a member short of Ready replicas for reasons of its own does not block
// the release forever, and is not made worse by it), and only once kubefed
// gave every member read what the spec now assigns it.
func (p *planning) releaseBreak(assigned map[string]int64) ReleaseResult {
	if len(p.unsynced(assigned)) > 0 {
		return ReleaseResult{Result: p.keep(ReasonWaitingForReplicas, time.Time{})}
	}
	next := clone(p.current)
	p.moveDown(next, p.currentTotal-p.total)
	if p.readyWithin(next) < min(p.total, p.readyWithin(p.current)) {
		return ReleaseResult{Result: p.keep(ReasonWaitingForReplicas, time.Time{})}
	}
	return ReleaseResult{Result: p.result(next, p.total, ReasonReleaseBreak)}
}

// readyWithin counts the Ready replicas a placement keeps.
func (p *planning) readyWithin(placement map[string]int64) int64 {
	var n int64
	for _, name := range p.names {
		n += min(max(p.member(name).Running, 0), placement[name])
	}
	return n
}

// unsynced names the members read whose workload does not have yet what
// the current spec assigns them.
func (p *planning) unsynced(assigned map[string]int64) map[string]bool {
	out := map[string]bool{}
	for _, n := range p.names {
		if a, ok := assigned[n]; ok && a != p.current[n] {
			out[n] = true
		}
	}
	return out
}

// releaseWaits names the members below their baseline share in the
// placement written (or kept), and why; and the members given replicas
// that kubefed has not given them yet or that are not Ready yet.
func (p *planning) releaseWaits(placement map[string]int64, total int64, assigned map[string]int64) []ReleaseWait {
	var out []ReleaseWait
	lagging := p.unsynced(assigned)
	for _, n := range p.names {
		m := p.member(n)
		w := ReleaseWait{Member: n, Has: placement[n], Share: p.baselined[n], Ready: max(m.Running, 0), Fits: max(m.Fits, 0)}
		switch {
		case total > p.total && lagging[n] && equalPlacement(placement, p.current):
			w.Reason, w.Ready = WaitKubefed, assigned[n]
		case total > p.total && m.State == Healthy && !m.Unobserved && w.Ready < w.Has:
			w.Reason = WaitReplicas
		case w.Has < w.Share && m.State == Failed:
			w.Reason = WaitNotReady
		case w.Has < w.Share && m.Unobserved:
			w.Reason = WaitUnobserved
		case w.Has < w.Share && m.State == Exhausted:
			w.Reason = WaitUnschedulable
		case w.Has < w.Share && p.room(n) <= w.Has:
			w.Reason = WaitNoRoom
		default:
			continue
		}
		out = append(out, w)
	}
	return out
}

// stepsLeft is how many make-before-break steps of maxStep the members
// below their baseline share in placement still need.
func (p *planning) stepsLeft(placement map[string]int64) int {
	var short int64
	for _, n := range p.names {
		short += max(p.baselined[n]-placement[n], 0)
	}
	return int((short + p.maxStep - 1) / p.maxStep)
}
