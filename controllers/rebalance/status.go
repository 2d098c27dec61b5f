package rebalance

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policy"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// StatusFieldOwner is the server-side apply field manager of
// status.rebalances and the Rebalancing condition (and of the rebalance
// entries it merges into status.recentDecisions, a list shared with node
// recovery: each writer merges its own decisions with the recorded ones).
const StatusFieldOwner = "fedfailover-rebalance"

const maxRebalances = 256

// rspEntry is the last pass's report of one managed RSP.
type rspEntry struct {
	status v1alpha1.RebalanceStatus
	// show lists it in status.rebalances.
	show bool
	// placement is its Rebalancing reason (v1alpha1.ReasonShifted, ...),
	// detail says which members and why.
	placement string
	detail    string
	// suspended is the guard's reason while it holds the RSP
	// (v1alpha1.ReasonTooManyMembersFailed, ...), suspendedDetail names
	// the members.
	suspended       string
	suspendedDetail string
	// readiness is the RSP's N+1 estimate of its last pass; nil when the
	// pass did not assess it (held, released).
	readiness *v1alpha1.RSPReadiness
}

func entriesEqual(a, b rspEntry) bool {
	return a.show == b.show && a.placement == b.placement && a.detail == b.detail &&
		a.suspended == b.suspended && a.suspendedDetail == b.suspendedDetail &&
		a.status.Shifted == b.status.Shifted && a.status.Reason == b.status.Reason &&
		timeOf(a.status.LastChangeTime).Equal(timeOf(b.status.LastChangeTime)) &&
		equality.Semantic.DeepEqual(a.readiness, b.readiness)
}

func newStore() *policystatus.Store[types.NamespacedName, rspEntry] {
	return policystatus.NewStore[types.NamespacedName](entriesEqual, 1024)
}

// statusWriter writes status.rebalances, the Rebalancing condition and the
// rebalance decisions of each policy.
func statusWriter(s *policystatus.Store[types.NamespacedName, rspEntry]) *policystatus.Writer[types.NamespacedName, rspEntry] {
	return &policystatus.Writer[types.NamespacedName, rspEntry]{Name: "failoverpolicy-rebalance", FieldOwner: StatusFieldOwner,
		Store: s, Build: desiredStatus}
}

// desiredStatus builds only the fields this controller owns. Without
// rebalancing enabled the Rebalancing condition is left out, which removes
// it.
func desiredStatus(pol *v1alpha1.FailoverPolicy, entries map[types.NamespacedName]rspEntry) v1alpha1.FailoverPolicyStatus {
	keys := make([]types.NamespacedName, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	var out v1alpha1.FailoverPolicyStatus
	for _, k := range keys {
		if e := entries[k]; e.show && len(out.Rebalances) < maxRebalances {
			out.Rebalances = append(out.Rebalances, e.status)
		}
	}
	switch {
	case policy.Enabled(pol, policy.Rebalance):
		out.FailoverReadiness = readinessList(keys, entries)
		out.Conditions = policystatus.Conditions(pol, rebalancingCondition(pol, keys, entries), suspendedCondition(pol, keys, entries),
			readinessCondition(pol, keys, entries))
	case releasing(entries):
		// Rebalancing off, but RSPs it shifted are still on their way
		// back: the condition says what their release waits for.
		out.Conditions = policystatus.Conditions(pol, rebalancingCondition(pol, keys, entries))
	}
	return out
}

// placementOrder ranks the placements: the condition's reason is the first
// that any managed RSP is in.
var placementOrder = []string{v1alpha1.ReasonRebalanceHeld, v1alpha1.ReasonShifted, v1alpha1.ReasonMemberMaintenance, v1alpha1.ReasonFailingBack,
	v1alpha1.ReasonReleasing}

// releasing: an RSP of the policy is being released (release.go).
func releasing(entries map[types.NamespacedName]rspEntry) bool {
	for _, e := range entries {
		if e.placement == v1alpha1.ReasonReleasing {
			return true
		}
	}
	return false
}

// rebalancingCondition is True while a managed RSP is away from its
// baseline (or held), with the first placement of placementOrder as reason
// and each such RSP's detail as message; False (AtBaseline) otherwise.
func rebalancingCondition(pol *v1alpha1.FailoverPolicy, keys []types.NamespacedName, entries map[types.NamespacedName]rspEntry) metav1.Condition {
	reason, rank := v1alpha1.ReasonAtBaseline, len(placementOrder)
	var details []string
	for _, k := range keys {
		e := entries[k]
		i := slices.Index(placementOrder, e.placement)
		if i < 0 {
			continue
		}
		details = append(details, e.detail)
		if i < rank {
			reason, rank = e.placement, i
		}
	}
	if len(details) == 0 {
		return policystatus.Condition(pol, v1alpha1.ConditionRebalancing, metav1.ConditionFalse, v1alpha1.ReasonAtBaseline,
			fmt.Sprintf("%d managed ReplicaSchedulingPreferences, all at their baseline", len(keys)))
	}
	return policystatus.Condition(pol, v1alpha1.ConditionRebalancing, metav1.ConditionTrue, reason, strings.Join(details, "; "))
}

// suspendedOrder ranks the reasons of the RebalanceSuspended condition.
var suspendedOrder = []string{v1alpha1.ReasonTooManyMembersFailed, v1alpha1.ReasonNoCapacityAnywhere,
	v1alpha1.ReasonMemberFailureUnconfirmed}

// suspendedCondition is True while a safety rule holds a managed RSP (the
// federation guard, no room anywhere, replicas on members fedfailover alone
// sees failed), with the first reason of suspendedOrder and each held RSP's
// detail as message; False (NotSuspended) otherwise.
func suspendedCondition(pol *v1alpha1.FailoverPolicy, keys []types.NamespacedName, entries map[types.NamespacedName]rspEntry) metav1.Condition {
	reason, rank := v1alpha1.ReasonNotSuspended, len(suspendedOrder)
	var details []string
	for _, k := range keys {
		e := entries[k]
		i := slices.Index(suspendedOrder, e.suspended)
		if i < 0 {
			continue
		}
		details = append(details, e.suspendedDetail)
		if i < rank {
			reason, rank = e.suspended, i
		}
	}
	if len(details) == 0 {
		return policystatus.Condition(pol, v1alpha1.ConditionRebalanceSuspended, metav1.ConditionFalse, v1alpha1.ReasonNotSuspended,
			"the federation guard holds no managed ReplicaSchedulingPreference")
	}
	return policystatus.Condition(pol, v1alpha1.ConditionRebalanceSuspended, metav1.ConditionTrue, reason, strings.Join(details, "; "))
}

// suspendedCounts counts, per guard reason, the policy's RSPs it holds.
// Every pass counts (the gauge is the policy's), so it visits the store's
// entries in place: a copy of all of them per pass was most of a goal-size
// pass's record.
func suspendedCounts(s *policystatus.Store[types.NamespacedName, rspEntry], policy string) map[string]int {
	out := make(map[string]int, len(suspendedOrder))
	for _, reason := range suspendedOrder {
		out[reason] = 0
	}
	s.Each(policy, func(_ types.NamespacedName, e rspEntry) {
		if e.suspended != "" {
			out[e.suspended]++
		}
	})
	return out
}

// Bounds of status.failoverReadiness: RSPs listed, and member entries
// over all of them (a policy over many members and RSPs must not make its
// status too large to write). The FailoverReady condition reads every
// entry, listed or not.
const (
	maxReadinessRSPs    = 256
	maxReadinessMembers = 4096
)

// readinessList is status.failoverReadiness: the N+1 estimate of each
// managed RSP assessed, by namespace and name, within the bounds above.
func readinessList(keys []types.NamespacedName, entries map[types.NamespacedName]rspEntry) []v1alpha1.RSPReadiness {
	var out []v1alpha1.RSPReadiness
	members := 0
	for _, k := range keys {
		e := entries[k]
		if e.readiness == nil {
			continue
		}
		members += len(e.readiness.Members)
		if len(out) == maxReadinessRSPs || members > maxReadinessMembers {
			break
		}
		out = append(out, *e.readiness)
	}
	return out
}

// memberShort is one member whose failure now would leave replicas of an
// RSP Pending.
type memberShort struct {
	rsp, member      string
	shortfall, total int32
}

// readinessCondition sums up the N+1 estimates of the policy's managed
// RSPs: False naming the worst member and RSP while some member's failure
// now would leave replicas Pending; else Unknown while some figure is not
// known (a member's room unknown, an RSP held); else True.
func readinessCondition(pol *v1alpha1.FailoverPolicy, keys []types.NamespacedName, entries map[types.NamespacedName]rspEntry) metav1.Condition {
	var shorts []memberShort
	var held, unknownRSPs []string
	unobserved := map[string]bool{}
	assessed := 0
	for _, k := range keys {
		e := entries[k]
		switch {
		case e.placement == v1alpha1.ReasonRebalanceHeld:
			held = append(held, k.String())
			continue
		case e.readiness == nil:
			continue // not a managed RSP's pass (a release)
		}
		assessed++
		unknown := false
		for _, m := range e.readiness.Members {
			if m.Unobserved {
				unobserved[m.Name] = true
			}
			switch {
			case m.Shortfall == nil:
				unknown = true
			case *m.Shortfall > 0:
				shorts = append(shorts, memberShort{rsp: k.String(), member: m.Name, shortfall: *m.Shortfall, total: e.readiness.TotalReplicas})
			}
		}
		if unknown {
			unknownRSPs = append(unknownRSPs, k.String())
		}
	}
	const estimate = "estimate: the members' running replicas plus what fits by requests against allocatable"
	if len(shorts) > 0 {
		slices.SortStableFunc(shorts, func(a, b memberShort) int { return cmp.Compare(b.shortfall, a.shortfall) })
		w := shorts[0]
		msg := fmt.Sprintf("if %s failed now, %d of the %d replicas of %s would find no room on the other members and stay Pending (%s)",
			w.member, w.shortfall, w.total, w.rsp, estimate)
		if rest := shorts[1:]; len(rest) > 0 {
			var parts []string
			for _, s := range rest[:min(len(rest), 10)] {
				parts = append(parts, fmt.Sprintf("%s if %s failed (%d)", s.rsp, s.member, s.shortfall))
			}
			if len(rest) > 10 {
				parts = append(parts, fmt.Sprintf("and %d more", len(rest)-10))
			}
			msg += "; also short: " + strings.Join(parts, ", ")
		}
		return policystatus.Condition(pol, v1alpha1.ConditionFailoverReady, metav1.ConditionFalse, v1alpha1.ReasonFailoverShortfall, msg)
	}
	if len(unknownRSPs) > 0 || len(held) > 0 {
		var parts []string
		if len(unknownRSPs) > 0 {
			parts = append(parts, fmt.Sprintf("the room of %s is unknown (fedfailover cannot read it now): not known for %s",
				strings.Join(slices.Sorted(maps.Keys(unobserved)), ", "), listSome(unknownRSPs)))
		}
		if len(held) > 0 {
			parts = append(parts, "held, not assessed: "+listSome(held))
		}
		return policystatus.Condition(pol, v1alpha1.ConditionFailoverReady, metav1.ConditionUnknown, v1alpha1.ReasonReadinessUnknown,
			strings.Join(parts, "; ")+"; no known failure would leave replicas Pending")
	}
	return policystatus.Condition(pol, v1alpha1.ConditionFailoverReady, metav1.ConditionTrue, v1alpha1.ReasonFailuresAbsorbed,
		fmt.Sprintf("any one member could fail now: the others have room for every replica of the %d managed ReplicaSchedulingPreferences (%s)",
			assessed, estimate))
}

// listSome joins up to 10 names, and counts the rest.
func listSome(names []string) string {
	if len(names) <= 10 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:10], ", "), len(names)-10)
}
