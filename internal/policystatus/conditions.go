package policystatus

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policy"
)

// MaxConditionMessage is the API's bound on a condition message.
const MaxConditionMessage = 32768

// Truncate shortens s to at most n bytes, marking the cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Condition is a condition of pol at its generation; the message is
// bounded.
func Condition(pol *v1alpha1.FailoverPolicy, typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: Truncate(msg, MaxConditionMessage),
		ObservedGeneration: pol.Generation}
}

// Conditions returns conds as they are to be applied: each keeps the
// recorded lastTransitionTime unless its status flips.
func Conditions(pol *v1alpha1.FailoverPolicy, conds ...metav1.Condition) []metav1.Condition {
	all := merged(pol, conds...)
	out := make([]metav1.Condition, 0, len(conds))
	for _, c := range conds {
		out = append(out, *meta.FindStatusCondition(all, c.Type))
	}
	return out
}

func merged(pol *v1alpha1.FailoverPolicy, conds ...metav1.Condition) []metav1.Condition {
	all := make([]metav1.Condition, len(pol.Status.Conditions))
	copy(all, pol.Status.Conditions)
	for _, c := range conds {
		meta.SetStatusCondition(&all, c)
	}
	return all
}

// blocker is one thing that keeps a policy from being Ready.
type blocker struct{ what, reason, msg string } // what: the condition type, if any

// Ready summarises the policy into its Ready condition: the one place that
// says whether a policy is enforced. conds are the policy's conditions as
// the controllers wrote them (with any about to be applied). It is False,
// with the reason of the first and the messages of all, while: a selector
// cannot be parsed (from the spec itself), no member is selected or the
// members cannot be listed, a storm suspends recovery, a lost node waits
// for fencing evidence, or a member refuses requests fedfailover makes (a
// permission its credentials lack). Disconnected members do not make it
// False: rebalancing them away is the policy at work (MembersConnected
// says so).
func Ready(pol *v1alpha1.FailoverPolicy, conds []metav1.Condition) metav1.Condition {
	var bs []blocker
	if pol.Spec.Paused {
		bs = append(bs, blocker{"", v1alpha1.ReasonPaused, "spec.paused: nothing is written to members or RSPs until it is unpaused"})
	}
	if bad := policy.Invalid(pol); len(bad) > 0 {
		bs = append(bs, blocker{"", v1alpha1.ReasonInvalidSelector, policy.InvalidMessage(bad)})
	}
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionMembersConnected); c != nil &&
		(c.Reason == v1alpha1.ReasonNoMembers || c.Reason == v1alpha1.ReasonListFailed) {
		bs = append(bs, blocker{c.Type, c.Reason, c.Message})
	}
	for _, t := range []string{v1alpha1.ConditionStormActive, v1alpha1.ConditionFencingBlocked, v1alpha1.ConditionMemberPermissionDenied} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionTrue {
			bs = append(bs, blocker{c.Type, c.Reason, c.Message})
		}
	}
	if len(bs) == 0 {
		msg := "policy is enforced on its members"
		if pol.Spec.DryRun {
			msg = "dry run: decisions are reported, nothing is changed"
		}
		return Condition(pol, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonEnforcing, msg)
	}
	parts := make([]string, 0, len(bs))
	for _, b := range bs {
		if b.what != "" {
			b.msg = b.what + ": " + b.msg
		}
		parts = append(parts, b.msg)
	}
	return Condition(pol, v1alpha1.ConditionReady, metav1.ConditionFalse, bs[0].reason, strings.Join(parts, "; "))
}

// ReadyInputsChanged passes policy updates that change what Ready says (a
// condition another controller wrote, the spec): Ready's writer watches
// policies with it.
var ReadyInputsChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, okO := e.ObjectOld.(*v1alpha1.FailoverPolicy)
	n, okN := e.ObjectNew.(*v1alpha1.FailoverPolicy)
	if !okO || !okN {
		return true
	}
	a, b := Ready(o, o.Status.Conditions), Ready(n, n.Status.Conditions)
	return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message || a.ObservedGeneration != b.ObservedGeneration
}}
