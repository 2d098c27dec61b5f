package planner

import (
	"slices"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"
)

// Wildcard is the kubefed cluster name whose preferences apply to every
// cluster without an entry of its own.
const Wildcard = "*"

// maxWeight bounds weights so weighted shares cannot overflow int64.
const maxWeight = 1 << 31

// unbounded marks a bounds.max without limit.
const unbounded = -1

// bounds are one cluster's sanitized preferences: no negatives, min <= max.
type bounds struct {
	min, max, weight int64
}

// boundsOf resolves a cluster's preferences as kubefed does: its own entry,
// else the "*" entry, else no replicas at all.
func boundsOf(prefs map[string]fedschedv1a1.ClusterPreferences, name string) bounds {
	p, ok := prefs[name]
	if !ok {
		p, ok = prefs[Wildcard]
	}
	if !ok {
		return bounds{max: 0}
	}
	b := bounds{min: max(p.MinReplicas, 0), max: unbounded, weight: min(max(p.Weight, 0), maxWeight)}
	if p.MaxReplicas != nil {
		b.max = max(*p.MaxReplicas, 0)
		b.min = min(b.min, b.max)
	}
	return b
}

// headroom is how many more replicas a cluster holding n may take.
func (b bounds) headroom(n int64) int64 {
	if b.max == unbounded {
		return maxWeight * 4 // more than any int32 total
	}
	return max(b.max-n, 0)
}

// distribute places total replicas over names (sorted) the way a kubefed
// ReplicaSchedulingPreference asks for: minimums first (in name order when
// they cannot all be met), then the rest in proportion to weight, never
// above max. Leftovers from rounding go one by one to the heaviest clusters
// (then by name). Replicas that fit nowhere are simply not placed.
func distribute(total int64, names []string, boundsFor func(string) bounds) map[string]int64 {
	alloc := make(map[string]int64, len(names))
	remaining := max(total, 0)
	for _, n := range names {
		give := min(boundsFor(n).min, remaining)
		alloc[n] = give
		remaining -= give
	}
	for remaining > 0 {
		active := activeClusters(names, alloc, boundsFor)
		if len(active) == 0 {
			break
		}
		remaining -= proportionalRound(remaining, active, alloc, boundsFor)
		if remaining > 0 {
			remaining -= oneEachRound(remaining, active, alloc, boundsFor)
		}
	}
	return alloc
}

func activeClusters(names []string, alloc map[string]int64, boundsFor func(string) bounds) []string {
	var active []string
	for _, n := range names {
		b := boundsFor(n)
		if b.weight > 0 && b.headroom(alloc[n]) > 0 {
			active = append(active, n)
		}
	}
	return active
}

// proportionalRound gives each active cluster floor(remaining*w/sum(w)),
// capped by its max, and returns how many it placed.
func proportionalRound(remaining int64, active []string, alloc map[string]int64, boundsFor func(string) bounds) int64 {
	var sumW int64
	for _, n := range active {
		sumW += boundsFor(n).weight
	}
	var placed int64
	for _, n := range active {
		b := boundsFor(n)
		share := min(remaining*b.weight/sumW, b.headroom(alloc[n]))
		alloc[n] += share
		placed += share
	}
	return placed
}

// oneEachRound hands out single replicas to clusters that still have
// headroom, heaviest first then by name, so rounding is deterministic.
func oneEachRound(remaining int64, active []string, alloc map[string]int64, boundsFor func(string) bounds) int64 {
	order := slices.Clone(active)
	slices.SortStableFunc(order, func(a, b string) int {
		return int(min(max(boundsFor(b).weight-boundsFor(a).weight, -1), 1))
	})
	var placed int64
	for _, n := range order {
		if placed == remaining {
			break
		}
		if boundsFor(n).headroom(alloc[n]) > 0 {
			alloc[n]++
			placed++
		}
	}
	return placed
}
