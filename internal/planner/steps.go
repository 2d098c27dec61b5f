package planner

import (
	"slices"
	"time"
)

// failbackStep moves at most maxStep replicas toward the ideal placement.
// With make-before-break it only raises the members below the ideal (and
// totalReplicas with them); the others shrink in a later step.
func (p *planning) failbackStep() Result {
	next := clone(p.current)
	step := p.moveUp(next, p.maxStep)
	if step == 0 {
		return p.keep(p.settledReason())
	}
	raised := p.filter(p.names, func(n string) bool { return next[n] > p.current[n] })
	var r Result
	if p.in.Spec.Failback.MakeBeforeBreak {
		r = p.result(next, p.total+step, ReasonFailbackMake)
	} else {
		p.moveDown(next, step)
		r = p.result(next, p.total, ReasonFailback)
	}
	r.FailedBack = raised
	return r
}

// shrinkToTotal ends a make-before-break step (or follows a scale-down):
// once every placed replica runs, or the stabilization window has passed
// since the raise, the members above the ideal give back the extra.
func (p *planning) shrinkToTotal() Result {
	excess := sum(p.current) - p.total
	if excess <= 0 {
		return p.result(p.current, p.total, ReasonFailbackBreak)
	}
	deadline := p.lastChange.Add(p.window)
	if p.in.Spec.Failback.MakeBeforeBreak && !p.allRunning() && p.now.Before(deadline) {
		return p.keep(ReasonWaitingForReplicas, deadline)
	}
	next := clone(p.current)
	p.moveDown(next, excess)
	return p.result(next, p.total, ReasonFailbackBreak)
}

func (p *planning) allRunning() bool {
	for _, n := range p.available() {
		if p.member(n).Running < p.current[n] {
			return false
		}
	}
	return true
}

// moveUp adds up to limit replicas to members below the ideal, largest gap
// first (then by name), and returns how many it added.
func (p *planning) moveUp(next map[string]int64, limit int64) int64 {
	var moved int64
	for _, n := range p.byGap(next, 1) {
		give := min(p.ideal[n]-next[n], limit-moved)
		next[n] += give
		moved += give
	}
	return moved
}

// moveDown removes count replicas from members above the ideal, largest
// surplus first; if that is not enough, from the largest holders.
func (p *planning) moveDown(next map[string]int64, count int64) {
	for _, n := range p.byGap(next, -1) {
		take := min(next[n]-p.ideal[n], count)
		next[n] -= take
		count -= take
	}
	for count > 0 {
		n := largest(next, p.names)
		if next[n] == 0 {
			return
		}
		take := min(next[n], count)
		next[n] -= take
		count -= take
	}
}

// byGap lists members whose gap to the ideal has the given sign, largest first.
func (p *planning) byGap(next map[string]int64, sign int64) []string {
	var out []string
	for _, n := range p.names {
		if (p.ideal[n]-next[n])*sign > 0 {
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int {
		return cmpDesc((p.ideal[a]-next[a])*sign, (p.ideal[b]-next[b])*sign)
	})
	return out
}

func largest(m map[string]int64, names []string) string {
	best := names[0]
	for _, n := range names[1:] {
		if m[n] > m[best] {
			best = n
		}
	}
	return best
}

func clone(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for n, v := range m {
		out[n] = v
	}
	return out
}

// requeueAfterChange: after a change with more steps to come, plan again
// when minInterval allows the next one.
func (p *planning) requeueAfterChange(placement map[string]int64) time.Time {
	if equalPlacement(placement, p.ideal) && sum(placement) == p.total {
		return time.Time{}
	}
	return p.now.Add(p.minInterval)
}
