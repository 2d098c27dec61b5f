package planner

import fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

// Hard caps and placement (docs/safety.md, section rebalance, rule 4): what
// a member may be given at all, whatever the plan.

// kubefedDefault is what kubefed schedules with when spec.clusters is
// empty: every cluster, weight 1.
var kubefedDefault = map[string]fedschedv1a1.ClusterPreferences{Wildcard: {Weight: 1}}

// withKubefedDefault reads preferences as kubefed does: empty means "*"
// with weight 1.
func withKubefedDefault(prefs map[string]fedschedv1a1.ClusterPreferences) map[string]fedschedv1a1.ClusterPreferences {
	if len(prefs) == 0 {
		return kubefedDefault
	}
	return prefs
}

// eligible: the member may be given replicas at all: the baseline lists
// it (or "*") and the target's own placement does not exclude it.
func (p *planning) eligible(n string) bool {
	if p.in.Eligible != nil && !p.in.Eligible[n] {
		return false
	}
	_, own := p.baseline[n]
	_, wildcard := p.baseline[Wildcard]
	return own || wildcard
}

// limit is the most replicas a plan may give the member: none when it is
// not eligible, else the baseline's maxReplicas unless the policy allows
// spilling past it (unbounded: no maximum).
func (p *planning) limit(n string) int64 {
	if !p.eligible(n) {
		return 0
	}
	if p.in.Spec.AllowSpill {
		return unbounded
	}
	return boundsOf(p.baseline, n).max
}

// headroomOf is how many more replicas the member may be given when it
// holds have: its limit, and no more than room when room >= 0.
func (p *planning) headroomOf(n string, have, room int64) int64 {
	h := bounds{max: p.limit(n)}.headroom(have)
	if room >= 0 {
		h = min(h, max(room-have, 0))
	}
	return h
}

// placeable bounds prefs of a cluster by what kubefed may place there:
// nothing outside the target's placement.
func (p *planning) placeable(prefs map[string]fedschedv1a1.ClusterPreferences, n string) bounds {
	b := boundsOf(prefs, n)
	if p.in.Eligible != nil && !p.in.Eligible[n] {
		return bounds{max: 0}
	}
	return b
}
