package planner

import "time"

// Planned maintenance of a member (docs/rebalance.md, "Planned maintenance
// of a member"). A member under an accepted MemberMaintenance (Member.
// Draining) is given, in the ideal placement, only what fits nowhere else.
// Its replicas leave it through the failback's own machinery, with the
// release's rules for the break:
//   - make: the other members below the ideal are raised by at most
//     maxStep, totalReplicas with them; only members with room are below
//     the ideal, so replicas move only as fast as the others have room;
//   - break: once kubefed gave every member read what the spec assigns it
//     and the Ready replicas left after lowering the member are at least
//     the user's totalReplicas (or what was Ready before, if fewer), the
//     member gives up as many as were raised. Unlike a failback's break,
//     no window lets it go sooner: a drain is not urgent;
//   - a jump to the ideal (a member failed, capacity exhausted, a
//     scale-up) never lowers a draining member at once: it keeps what it
//     holds (within its room when exhausted) and totalReplicas is raised
//     by as much, so the break above takes it off later.
// A draining member that is Unobserved keeps what it holds: its Ready
// replicas cannot be counted. Ending the maintenance is a failback like
// any other: the member's room counts from the first pass after the end,
// the stabilization window and maxStep apply.

// drains: the member is draining and its replicas can be counted.
func (p *planning) drains(n string) bool {
	m := p.member(n)
	return m.Draining && !m.Unobserved && m.State != Failed
}

// anyDraining: some member drains. Its rules then hold for every break.
func (p *planning) anyDraining() bool {
	for _, n := range p.names {
		if p.drains(n) {
			return true
		}
	}
	return false
}

// jump writes placement (the ideal) at once, except that a draining member
// keeps what it holds (within its room when exhausted: replicas that
// cannot run there are not kept), with totalReplicas raised by as much.
func (p *planning) jump(placement map[string]int64, reason string) Result {
	next := clone(placement)
	for _, n := range p.names {
		if !p.drains(n) {
			continue
		}
		keep := p.current[n]
		if p.member(n).State == Exhausted {
			keep = min(keep, p.room(n))
		}
		next[n] = max(next[n], keep)
	}
	return p.result(next, max(p.total, sum(next)), reason)
}

// drainStep raises the members below the ideal by at most maxStep (make).
func (p *planning) drainStep() Result {
	next := clone(p.current)
	step := p.moveUp(next, p.maxStep)
	if step == 0 {
		return p.keep(ReasonDrainWaitingForRoom, time.Time{})
	}
	return p.result(next, p.total+step, ReasonDrainMake)
}

// drainBreak lowers the members above the ideal (the draining one first)
// back to totalReplicas, once kubefed synced every member read and the
// Ready replicas left are at least the user's total (or all that are
// Ready now, if fewer).
func (p *planning) drainBreak() Result {
	if len(p.unsynced(p.in.Assigned)) > 0 {
		return p.keep(ReasonWaitingForReplicas, time.Time{})
	}
	next := clone(p.current)
	p.moveDown(next, p.currentTotal-p.total)
	if p.readyWithin(next) < min(p.total, p.readyWithin(p.current)) {
		return p.keep(ReasonWaitingForReplicas, time.Time{})
	}
	return p.result(next, p.total, ReasonDrainBreak)
}

// DrainProgress is how far the drain of one member is for one RSP.
type DrainProgress struct {
	// Share is the member's share under the user's weights; Left what the
	// RSP asks of it now (Moved: Share - Left, never below zero).
	Share, Left, Moved int64
	// Pending: replicas raised on other members for the drain, not Ready
	// yet; PendingOn names those members.
	Pending   int64
	PendingOn []string
	// WaitingForRoom: the member's replicas that fit on no other member.
	WaitingForRoom int64
}

// Drained: nothing is left on the member but what fits nowhere else.
func (d DrainProgress) Drained() bool { return d.Left <= d.WaitingForRoom && d.Pending == 0 }

// DrainProgressOf is the drain of member for the RSP of in (Draining set).
func DrainProgressOf(in Input, member string) DrainProgress {
	p := newPlanning(in)
	left := p.current[member]
	out := DrainProgress{Share: p.baselined[member], Left: left}
	out.Moved = max(out.Share-left, 0)
	if p.currentTotal > p.total {
		for _, n := range p.names {
			if n == member || p.failed(n) {
				continue
			}
			if short := p.current[n] - max(p.member(n).Running, 0); short > 0 {
				out.Pending += short
				out.PendingOn = append(out.PendingOn, n)
			}
		}
	}
	out.WaitingForRoom = min(p.ideal[member], left)
	return out
}
