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
// the room of members not failed.
func (p *planning) runnable(placement map[string]int64) int64 {
	var n int64
	for _, name := range p.names {
		if !p.failed(name) {
			n += min(placement[name], p.room(name))
		}
	}
	return n
}

// unconfirmed reads a member Failed while kubefed reports it Ready as
// Unconfirmed: fedfailover's own view alone is no proof of failure. Such a
// member keeps what it holds (Unobserved: its room is unknown) and counts
// as failing for the federation guard. The caller's map is not modified.
func unconfirmed(members map[string]Member) map[string]Member {
	var out map[string]Member
	for n, m := range members {
		if !m.Unconfirmed && (m.State != Failed || !m.KubefedReady) {
			continue
		}
		if out == nil {
			out = make(map[string]Member, len(members))
			for k, v := range members {
				out[k] = v
			}
		}
		out[n] = Member{State: Healthy, KubefedReady: m.KubefedReady, Backoff: m.Backoff,
			Unobserved: true, Failing: true, Unconfirmed: true}
	}
	if out == nil {
		return members
	}
	return out
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
