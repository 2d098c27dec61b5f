package planner

import "k8s.io/apimachinery/pkg/util/intstr"

// The rules that keep a plan never worse than kubefed alone (docs/safety.md,
// section rebalance).

// tooManyFailed is the federation guard: more members Failed than
// maxFailedMembers (default half of them, rounded down) means no shift.
// Members still failing (not Failed yet) count as well once one member is
// Failed: members cut off together do not reach clusterFailedAfter in the
// same pass, and the first one to get there must not be moved off while
// the others, just as lost, still look healthy.
func (p *planning) tooManyFailed() bool {
	failed, failing := p.failedCounts()
	return failed > 0 && failed+failing > p.maxFailed()
}

// failedCounts counts the members Failed, and the members failing but not
// Failed yet.
func (p *planning) failedCounts() (failed, failing int) {
	for _, n := range p.names {
		switch {
		case p.failed(n):
			failed++
		case p.member(n).Failing:
			failing++
		}
	}
	return failed, failing
}

func (p *planning) maxFailed() int {
	limit := intstr.FromString("50%")
	if p.in.Spec.MaxFailedMembers != nil {
		limit = *p.in.Spec.MaxFailedMembers
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(&limit, len(p.names), false)
	if err != nil {
		return len(p.names) / 2 // admission validates the value; stay at the default
	}
	return n
}

// runnable is how many replicas of a placement members can run: within
// the room of members not failed, plus what members seen failed by
// fedfailover alone hold (they may well run them; kubefed would keep them).
func (p *planning) runnable(placement map[string]int64) int64 {
	var n int64
	for _, name := range p.names {
		switch {
		case p.unconfirmedFailure(name):
			n += min(placement[name], p.current[name])
		case !p.failed(name):
			n += min(placement[name], p.room(name))
		}
	}
	return n
}

// unconfirmedFailure: fedfailover sees the member failed, kubefed does not.
func (p *planning) unconfirmedFailure(n string) bool {
	return p.failed(n) && p.member(n).KubefedReady
}

// keepUnconfirmed leaves on members seen failed by fedfailover alone the
// replicas that fit nowhere else (up to what each holds): moving them
// would turn running replicas into Pending ones, which kubefed alone would
// not do. It returns how many it kept.
func (p *planning) keepUnconfirmed(ideal map[string]int64, left int64) int64 {
	var kept int64
	for _, n := range p.names {
		if !p.unconfirmedFailure(n) || left-kept <= 0 {
			continue
		}
		give := min(p.current[n], left-kept)
		ideal[n] += give
		kept += give
	}
	return kept
}

// failureReason names a move off failed members: MemberUnreachable when
// every failed member holding replicas is one only fedfailover sees failed.
func (p *planning) failureReason() string {
	for _, n := range p.names {
		if p.failed(n) && p.current[n] > 0 && !p.member(n).KubefedReady {
			return ReasonMemberFailed
		}
	}
	return ReasonMemberUnreachable
}

// moveOffUnconfirmed is rule 1 when only fedfailover sees the failure:
// make before break. The other members are raised to their share first
// (totalReplicas grows with them) while the unconfirmed members keep what
// they hold, as kubefed alone would; only once the raised replicas run do
// the unconfirmed members give theirs up.
func (p *planning) moveOffUnconfirmed() Result {
	raised := clone(p.ideal)
	var extra int64
	for _, n := range p.names {
		if p.unconfirmedFailure(n) && p.current[n] > raised[n] {
			extra += p.current[n] - raised[n]
			raised[n] = p.current[n]
		}
	}
	switch {
	case extra == 0:
		return p.result(p.ideal, p.total, ReasonMemberUnreachable)
	case !equalPlacement(raised, p.current):
		return p.result(raised, p.total+extra, ReasonMemberUnreachable)
	}
	for _, n := range p.available() {
		if p.member(n).Running < p.current[n] {
			return p.keep(ReasonWaitingForReplicas, p.now.Add(p.minInterval))
		}
	}
	return p.result(p.ideal, p.total, ReasonMemberUnreachable)
}

// unobservedHold: a member fedfailover's own view says nothing about yet
// holds replicas. Its room is unknown, not none.
func (p *planning) unobservedHold() bool {
	for _, n := range p.names {
		if p.member(n).Unobserved && p.current[n] > 0 {
			return true
		}
	}
	return false
}
