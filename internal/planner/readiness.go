package planner

import (
	"slices"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Failover readiness (N+1): for each member, whether the other members
// could run the workload's replicas if that member failed now, and how many
// would stay Pending (docs/rebalance.md, "Failover readiness (N+1)"). The
// figure comes from the room a rebalance pass already observed (running
// replicas plus capacity.Fit), so it costs no read of its own. It is a
// capacity estimate: the federation guard, timers and make-before-break
// are not part of it.

// ReadinessInput is what the N+1 estimate of one RSP depends on.
type ReadinessInput struct {
	// TotalReplicas is the user's totalReplicas: what the members left
	// after a failure must run.
	TotalReplicas int64
	// Members are the members the policy selects.
	Members map[string]ReadinessMember
}

// ReadinessMember is one member's part in the estimate.
type ReadinessMember struct {
	// Replicas is how many replicas the RSP places on the member now.
	Replicas int64
	// Room is how many of the workload's replicas the member can run:
	// its Running and Ready replicas plus what fits more (capacity.Fit),
	// no more than the RSP lets kubefed give it (the baseline's
	// maxReplicas unless allowSpill; none outside the target's placement);
	// none when it is Failed. For an Unobserved member it is what the RSP
	// places there (it keeps what it holds, its room is unknown).
	Room int64
	// Unobserved: fedfailover's own view says nothing about the member now
	// (its cache syncing, unreachable, failing but not failed yet).
	Unobserved bool
}

// Readiness is what one member's failure now would leave of an RSP.
type Readiness struct {
	// Replicas is how many replicas the RSP places on the member now.
	Replicas int64
	// Shortfall is how many of the RSP's totalReplicas the other members
	// have no room for: they would stay Pending if the member failed now.
	Shortfall int64
	// Known is false when another member is Unobserved: its room is
	// unknown, and Shortfall may be too high.
	Known bool
}

// FailoverReadiness is, for each member of in, what its failure now would
// leave Pending: the replicas the other members have no room for. The
// rebalance controller computes it on every pass, `kubectl failover plan
// --fail` on what the controller published; both call this function.
func FailoverReadiness(in ReadinessInput) map[string]Readiness {
	var room int64
	unobserved := 0
	for _, m := range in.Members {
		room += max(m.Room, 0)
		if m.Unobserved {
			unobserved++
		}
	}
	total := max(in.TotalReplicas, 0)
	out := make(map[string]Readiness, len(in.Members))
	for n, m := range in.Members {
		others := room - max(m.Room, 0)
		out[n] = Readiness{Replicas: max(m.Replicas, 0), Shortfall: max(total-others, 0),
			Known: unobserved == 0 || (unobserved == 1 && m.Unobserved)}
	}
	return out
}

// ReadinessInputOf is the N+1 input of a planning pass: every member of
// in (not "*") with the replicas the RSP places there now and the room
// the planner counts for it, at most totalReplicas (more changes nothing,
// and a bounded figure keeps the published status from following every
// pod a full member runs).
func ReadinessInputOf(in Input) ReadinessInput {
	p := newPlanning(in)
	out := ReadinessInput{TotalReplicas: p.total, Members: make(map[string]ReadinessMember, len(p.names))}
	for _, n := range p.names {
		m := ReadinessMember{Replicas: p.current[n]}
		switch {
		case p.failed(n):
		case p.member(n).Unobserved:
			// Room unknown, not none: it keeps what it holds. A member
			// that may be given nothing cannot take replicas either way.
			m.Room, m.Unobserved = p.current[n], p.limit(n) != 0
		default:
			m.Room = p.room(n)
			if l := p.limit(n); l != unbounded {
				m.Room = min(m.Room, l)
			}
			if p.drains(n) {
				// Under maintenance: it takes nothing more.
				m.Room = min(m.Room, p.current[n])
			}
		}
		m.Room = min(m.Room, p.total)
		out.Members[n] = m
	}
	return out
}

// ReadinessStatus is the published form of an RSP's N+1 estimate
// (status.failoverReadiness of its policy): the input and, per member, the
// shortfall when it is known.
func ReadinessStatus(namespace, name string, in ReadinessInput) v1alpha1.RSPReadiness {
	out := v1alpha1.RSPReadiness{Namespace: namespace, Name: name, TotalReplicas: clamp32(in.TotalReplicas)}
	res := FailoverReadiness(in)
	for _, n := range sortedNames(in.Members) {
		m, r := in.Members[n], res[n]
		mr := v1alpha1.MemberReadiness{Name: n, Replicas: clamp32(m.Replicas), Room: clamp32(m.Room), Unobserved: m.Unobserved}
		if r.Known {
			s := clamp32(r.Shortfall)
			mr.Shortfall = &s
		}
		out.Members = append(out.Members, mr)
	}
	return out
}

// ReadinessInputFromStatus reads a published estimate back as the input
// it was made from.
func ReadinessInputFromStatus(st v1alpha1.RSPReadiness) ReadinessInput {
	in := ReadinessInput{TotalReplicas: int64(st.TotalReplicas), Members: make(map[string]ReadinessMember, len(st.Members))}
	for _, m := range st.Members {
		in.Members[m.Name] = ReadinessMember{Replicas: int64(m.Replicas), Room: int64(m.Room), Unobserved: m.Unobserved}
	}
	return in
}

func clamp32(v int64) int32 { return int32(min(max(v, 0), 1<<31-1)) }

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
