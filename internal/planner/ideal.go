package planner

import "slices"

// idealPlacement is where the replicas should be given member health, and
// how many of them lie beyond the federation's known room.
func (p *planning) idealPlacement() (map[string]int64, int64) {
	avail := p.available()
	ideal := distribute(p.total, avail, func(n string) bounds {
		b := capAt(p.placeable(p.baseline, n), p.idealCap(n))
		if p.member(n).Unobserved {
			// Nothing known of it now (syncing, failing, or failed to
			// fedfailover alone): it keeps what it holds.
			b.min = max(b.min, b.max)
		}
		return b
	})
	ideal = fill(ideal, p.names)
	left := p.total - sum(ideal)
	// A draining member takes no spill: only what fits nowhere else stays.
	open := p.filter(avail, func(n string) bool { return !p.drains(n) })
	left -= p.spill(ideal, left, p.filter(open, p.stable))
	left -= p.spill(ideal, left, open)
	left -= p.keepOverflow(ideal, left, avail)
	spread := avail
	if len(open) > 0 {
		spread = open
	}
	p.spreadUnbounded(ideal, left, spread)
	var withinRoom int64
	for _, n := range avail {
		room := p.room(n)
		if p.member(n).Unobserved {
			// Room unknown, not none: what it holds is not beyond it.
			room = max(room, p.current[n])
		}
		withinRoom += min(ideal[n], room)
	}
	return ideal, max(p.total-withinRoom, 0)
}

// idealCap bounds a member's baseline share: a draining member at none; an exhausted member at its
// room; a member predicted short at its predicted room; a stable member at its room, but never below what it holds (no
// move on a capacity estimate alone: the exhaustion signal decides); a
// member not yet stable at what it holds (no failback before the window).
func (p *planning) idealCap(n string) int64 {
	switch {
	case p.drains(n):
		return 0
	case p.member(n).State == Exhausted:
		return p.room(n)
	case p.predictsShortfall(n):
		return p.predictedRoom(n)
	case p.stable(n):
		return max(p.room(n), p.current[n])
	default:
		return p.current[n]
	}
}

// spill places up to left replicas on candidates with room left, by
// baseline weight (all equal when the candidates' weights are all zero),
// within each member's limit (its maxReplicas unless allowSpill). It
// returns how many it placed.
func (p *planning) spill(ideal map[string]int64, left int64, candidates []string) int64 {
	if left <= 0 {
		return 0
	}
	withRoom := p.filter(candidates, func(n string) bool { return p.headroomOf(n, ideal[n], p.room(n)) > 0 })
	weight := p.spillWeights(withRoom)
	added := distribute(left, withRoom, func(n string) bounds {
		return bounds{max: p.headroomOf(n, ideal[n], p.room(n)), weight: weight(n)}
	})
	return addInto(ideal, added)
}

func (p *planning) spillWeights(candidates []string) func(string) int64 {
	for _, n := range candidates {
		if boundsOf(p.baseline, n).weight > 0 {
			return func(n string) int64 { return boundsOf(p.baseline, n).weight }
		}
	}
	return func(string) int64 { return 1 }
}

// keepOverflow leaves replicas that fit nowhere else where they are now
// (largest overflow first): moving Pending pods between full members helps
// nobody. It returns how many it placed.
func (p *planning) keepOverflow(ideal map[string]int64, left int64, avail []string) int64 {
	order := slices.Clone(avail)
	slices.SortStableFunc(order, func(a, b string) int {
		return cmpDesc(p.current[a]-ideal[a], p.current[b]-ideal[b])
	})
	var placed int64
	for _, n := range order {
		give := min(max(p.current[n]-ideal[n], 0), left-placed, p.headroomOf(n, ideal[n], -1))
		ideal[n] += give
		placed += give
	}
	return placed
}

// spreadUnbounded places replicas of failed members (or a scale-up) that
// fit nowhere: on stable members if any, else on any member not failed, by
// baseline weight, so totalReplicas stays wanted (Pending pods are what a
// cluster autoscaler reacts to).
func (p *planning) spreadUnbounded(ideal map[string]int64, left int64, avail []string) {
	if left <= 0 || len(avail) == 0 {
		return
	}
	open := p.filter(avail, func(n string) bool { return p.headroomOf(n, ideal[n], -1) > 0 })
	targets := p.filter(open, p.stable)
	if len(targets) == 0 {
		targets = open
	}
	weight := p.spillWeights(targets)
	addInto(ideal, distribute(left, targets, func(n string) bounds {
		if l := p.limit(n); l != unbounded {
			return bounds{max: l - ideal[n], weight: weight(n)}
		}
		return bounds{max: unbounded, weight: weight(n)}
	}))
}

func (p *planning) filter(names []string, keep func(string) bool) []string {
	var out []string
	for _, n := range names {
		if keep(n) {
			out = append(out, n)
		}
	}
	return out
}

func capAt(b bounds, limit int64) bounds {
	if b.max == unbounded || b.max > limit {
		b.max = max(limit, 0)
	}
	b.min = min(b.min, b.max)
	return b
}

// fill gives every name an entry, so placements compare cleanly.
func fill(m map[string]int64, names []string) map[string]int64 {
	for _, n := range names {
		m[n] += 0
	}
	return m
}

func addInto(into, add map[string]int64) int64 {
	var total int64
	for n, v := range add {
		into[n] += v
		total += v
	}
	return total
}

func sum(m map[string]int64) int64 {
	var total int64
	for _, v := range m {
		total += v
	}
	return total
}

func equalPlacement(a, b map[string]int64) bool {
	for n, v := range a {
		if b[n] != v {
			return false
		}
	}
	for n, v := range b {
		if a[n] != v {
			return false
		}
	}
	return true
}

// cmpDesc orders larger values first.
func cmpDesc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
