// Package policy holds the rules about FailoverPolicies themselves, shared
// by the controllers and the CLI: how their label selectors are parsed
// (and what an invalid one means) and which policy governs a member's node
// recovery or an RSP's rebalancing. It is pure: API types and apimachinery
// labels in, answers out; callers read the objects.
package policy

import (
	"errors"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Fields of a FailoverPolicy that hold label selectors, as messages name them.
const (
	FieldClusterSelector      = "spec.clusterSelector"
	FieldPodSelector          = fieldPodScope + ".selector"
	FieldPodNamespaceSelector = fieldPodScope + ".namespaceSelector"
	FieldRSPSelector          = fieldRSPScope + ".selector"
	FieldRSPNamespaceSelector = fieldRSPScope + ".namespaceSelector"
	FieldNodeSelector         = "spec.nodeRecovery.nodeSelector"

	fieldPodScope = "spec.nodeRecovery.pods"
	fieldRSPScope = "spec.rebalance.replicaSchedulingPreferences"
)

// SelectorError is a label selector of a policy that cannot be parsed. Such
// a policy acts on nothing new; its Ready condition says why.
type SelectorError struct {
	// Field is the selector's path, e.g. spec.clusterSelector.
	Field string
	Err   error
}

func (e *SelectorError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *SelectorError) Unwrap() error { return e.Err }

// Parse parses the selector at field. Absent or empty selects everything.
func Parse(field string, sel *metav1.LabelSelector) (labels.Selector, error) {
	if sel == nil {
		return labels.Everything(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return labels.Nothing(), &SelectorError{Field: field, Err: err}
	}
	return s, nil
}

// Clusters parses spec.clusterSelector: which KubeFedClusters (by their
// labels) the policy selects.
func Clusters(p *v1alpha1.FailoverPolicy) (labels.Selector, error) {
	return Parse(FieldClusterSelector, p.Spec.ClusterSelector)
}

// Invalid lists the selectors of the policy that cannot be parsed, in
// field order (the first of a scope's two); empty when all can.
func Invalid(p *v1alpha1.FailoverPolicy) []*SelectorError {
	var out []*SelectorError
	add := func(err error) {
		var se *SelectorError
		if errors.As(err, &se) {
			out = append(out, se)
		}
	}
	_, err := Clusters(p)
	add(err)
	if nr := p.Spec.NodeRecovery; nr != nil {
		_, err := PodScope(nr)
		add(err)
		_, err = Nodes(nr)
		add(err)
	}
	if rb := p.Spec.Rebalance; rb != nil {
		_, err := RSPScope(rb)
		add(err)
	}
	return out
}

// Object is what a scope is matched against: an object's labels and
// namespace, and that namespace's labels (needed only when the scope has a
// namespaceSelector, see Scope.NeedsNamespaceLabels).
type Object struct {
	Labels          map[string]string
	Namespace       string
	NamespaceLabels map[string]string
}

// Scope is a parsed v1alpha1.PodScope: namespaces by name or by label,
// and objects by label. The zero Scope, like an empty PodScope, selects
// everything.
type Scope struct {
	objects    labels.Selector // nil: any
	namespaces []string        // by name; nil: any
	nsLabels   labels.Selector // nil: any
}

// ParseScope parses a PodScope whose selectors live at prefix+".selector"
// and prefix+".namespaceSelector".
func ParseScope(prefix string, s v1alpha1.PodScope) (Scope, error) {
	objects, err := Parse(prefix+".selector", s.Selector)
	if err != nil {
		return Scope{objects: labels.Nothing()}, err
	}
	out := Scope{objects: objects}
	switch {
	case len(s.Namespaces) > 0:
		out.namespaces = s.Namespaces
	case s.NamespaceSelector != nil:
		ns, err := Parse(prefix+".namespaceSelector", s.NamespaceSelector)
		if err != nil {
			return Scope{objects: labels.Nothing()}, err
		}
		out.nsLabels = ns
	}
	return out, nil
}

// RSPScope parses spec.rebalance.replicaSchedulingPreferences.
func RSPScope(rb *v1alpha1.RebalanceSpec) (Scope, error) {
	return ParseScope(fieldRSPScope, rb.ReplicaSchedulingPreferences)
}

// PodScope parses spec.nodeRecovery.pods.
func PodScope(nr *v1alpha1.NodeRecoverySpec) (Scope, error) {
	return ParseScope(fieldPodScope, nr.Pods)
}

// NeedsNamespaceLabels says whether Matches reads Object.NamespaceLabels.
func (s Scope) NeedsNamespaceLabels() bool { return s.nsLabels != nil }

// Namespaces returns the namespaces listed by name, nil when any (or a
// namespaceSelector) is allowed.
func (s Scope) Namespaces() []string { return s.namespaces }

// NamespaceSelector returns the parsed namespaceSelector, nil when none.
func (s Scope) NamespaceSelector() labels.Selector { return s.nsLabels }

// Matches reports whether the scope selects the object.
func (s Scope) Matches(o Object) bool {
	if s.objects != nil && !s.objects.Matches(labels.Set(o.Labels)) {
		return false
	}
	switch {
	case s.namespaces != nil:
		return slices.Contains(s.namespaces, o.Namespace)
	case s.nsLabels != nil:
		return s.nsLabels.Matches(labels.Set(o.NamespaceLabels))
	}
	return true
}

// InvalidMessage is the condition message for unparsable selectors: each
// field with the parser's message.
func InvalidMessage(errs []*SelectorError) string {
	parts := make([]string, 0, len(errs))
	for _, e := range errs {
		parts = append(parts, e.Error())
	}
	return "invalid selector, the policy acts on nothing new: " + strings.Join(parts, "; ")
}

// ControlPlaneLabel marks control-plane nodes, which node recovery leaves
// alone unless spec.nodeRecovery.nodeSelector says otherwise.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

// Nodes parses spec.nodeRecovery.nodeSelector: which member Nodes node
// recovery may act on. Absent: every node but control-plane nodes.
func Nodes(nr *v1alpha1.NodeRecoverySpec) (labels.Selector, error) {
	if nr.NodeSelector == nil {
		req, err := labels.NewRequirement(ControlPlaneLabel, selection.DoesNotExist, nil)
		if err != nil {
			return labels.Nothing(), err
		}
		return labels.NewSelector().Add(*req), nil
	}
	return Parse(FieldNodeSelector, nr.NodeSelector)
}
