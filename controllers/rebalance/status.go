package rebalance

import (
	"fmt"
	"slices"
	"strings"

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
}

func entriesEqual(a, b rspEntry) bool {
	return a.show == b.show && a.placement == b.placement && a.detail == b.detail &&
		a.suspended == b.suspended && a.suspendedDetail == b.suspendedDetail &&
		a.status.Shifted == b.status.Shifted && a.status.Reason == b.status.Reason &&
		timeOf(a.status.LastChangeTime).Equal(timeOf(b.status.LastChangeTime))
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
		out.Conditions = policystatus.Conditions(pol, rebalancingCondition(pol, keys, entries), suspendedCondition(pol, keys, entries))
	case releasing(entries):
		// Rebalancing off, but RSPs it shifted are still on their way
		// back: the condition says what their release waits for.
		out.Conditions = policystatus.Conditions(pol, rebalancingCondition(pol, keys, entries))
	}
	return out
}

// placementOrder ranks the placements: the condition's reason is the first
// that any managed RSP is in.
var placementOrder = []string{v1alpha1.ReasonRebalanceHeld, v1alpha1.ReasonShifted, v1alpha1.ReasonFailingBack, v1alpha1.ReasonReleasing}

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
func suspendedCounts(entries map[types.NamespacedName]rspEntry) map[string]int {
	out := make(map[string]int, len(suspendedOrder))
	for _, reason := range suspendedOrder {
		out[reason] = 0
	}
	for _, e := range entries {
		if e.suspended != "" {
			out[e.suspended]++
		}
	}
	return out
}
