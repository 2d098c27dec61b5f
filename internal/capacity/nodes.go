package capacity

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// Eligible reports whether the scheduler could place a pod with this spec
// on node, ignoring resources; otherwise it says why not. It checks what the
// estimate promises: Ready, schedulable, NoSchedule/NoExecute taints
// tolerated, nodeSelector and required node affinity. Ports, volumes,
// topology spread and pod (anti-)affinity are not checked, so the estimate
// can be high; the exhaustion signal (Unschedulable pods) corrects that.
func Eligible(node *corev1.Node, spec *corev1.PodSpec) (bool, string) {
	if spec == nil {
		spec = &corev1.PodSpec{}
	}
	switch {
	case !nodecond.IsReady(node):
		return false, "NotReady"
	case node.Spec.Unschedulable && !tolerates(spec.Tolerations, &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}):
		return false, "Unschedulable"
	}
	if taint := untoleratedTaint(node, spec.Tolerations); taint != nil {
		return false, fmt.Sprintf("Taint %s:%s", taint.Key, taint.Effect)
	}
	if !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(node.Labels)) {
		return false, "NodeSelector"
	}
	if !matchesRequiredAffinity(node, spec.Affinity) {
		return false, "NodeAffinity"
	}
	return true, ""
}

// NodeUpdateChangesFit is NodeFitChanged for an informer's or a watch
// event's objects: anything but two Nodes counts as a change.
func NodeUpdateChangesFit(old, cur any) bool {
	o, okO := old.(*corev1.Node)
	n, okN := cur.(*corev1.Node)
	return !okO || !okN || NodeFitChanged(o, n)
}

// NodeFitChanged reports whether a node's update changes what Eligible and
// an estimate read of it: Ready, unschedulable, taints, labels, name and
// allocatable. A kubelet's status heartbeat changes none of them.
func NodeFitChanged(old, cur *corev1.Node) bool {
	return old.Name != cur.Name ||
		nodecond.IsReady(old) != nodecond.IsReady(cur) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!slices.EqualFunc(old.Spec.Taints, cur.Spec.Taints, sameTaint) ||
		!maps.Equal(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable)
}

// sameTaint compares what tolerations read of a taint (not its time added).
func sameTaint(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// untoleratedTaint returns the first NoSchedule or NoExecute taint the pod
// does not tolerate; PreferNoSchedule never blocks scheduling.
func untoleratedTaint(node *corev1.Node, tolerations []corev1.Toleration) *corev1.Taint {
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !tolerates(tolerations, t) {
			return t
		}
	}
	return nil
}

// tolerates treats the Gt/Lt operators as not matching, as a scheduler
// without that feature gate does: underestimating is the safe side.
func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(logr.Discard(), taint, false) {
			return true
		}
	}
	return false
}

// matchesRequiredAffinity evaluates requiredDuringSchedulingIgnoredDuringExecution:
// terms are ORed, expressions within a term ANDed; an empty term matches nothing.
func matchesRequiredAffinity(node *corev1.Node, affinity *corev1.Affinity) bool {
	if affinity == nil || affinity.NodeAffinity == nil || affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return true
	}
	for _, term := range affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if termMatches(node, term) {
			return true
		}
	}
	return false
}

func termMatches(node *corev1.Node, term corev1.NodeSelectorTerm) bool {
	if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
		return false
	}
	for _, expr := range term.MatchExpressions {
		if !requirementMatches(expr, labels.Set(node.Labels)) {
			return false
		}
	}
	fields := labels.Set{"metadata.name": node.Name}
	for _, expr := range term.MatchFields {
		if !requirementMatches(expr, fields) {
			return false
		}
	}
	return true
}

var nodeSelectorOps = map[corev1.NodeSelectorOperator]selection.Operator{
	corev1.NodeSelectorOpIn:           selection.In,
	corev1.NodeSelectorOpNotIn:        selection.NotIn,
	corev1.NodeSelectorOpExists:       selection.Exists,
	corev1.NodeSelectorOpDoesNotExist: selection.DoesNotExist,
	corev1.NodeSelectorOpGt:           selection.GreaterThan,
	corev1.NodeSelectorOpLt:           selection.LessThan,
}

// requirementMatches treats an expression it cannot parse as not matching.
func requirementMatches(expr corev1.NodeSelectorRequirement, set labels.Set) bool {
	op, ok := nodeSelectorOps[expr.Operator]
	if !ok {
		return false
	}
	req, err := labels.NewRequirement(expr.Key, op, expr.Values)
	if err != nil {
		return false
	}
	return req.Matches(set)
}
