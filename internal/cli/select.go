package cli

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// policyMembers lists the KubeFedClusters a policy selects, sorted.
func (s *Snapshot) policyMembers(p *v1alpha1.FailoverPolicy) []string {
	sel := labels.Everything()
	if p.Spec.ClusterSelector != nil {
		parsed, err := metav1.LabelSelectorAsSelector(p.Spec.ClusterSelector)
		if err != nil {
			return nil
		}
		sel = parsed
	}
	var out []string
	for i := range s.Clusters {
		if sel.Matches(labels.Set(s.Clusters[i].Labels)) {
			out = append(out, s.Clusters[i].Name)
		}
	}
	return out
}

// rebalancePolicy is the policy that manages an RSP, chosen as the
// rebalance controller does: the oldest (then by name) enabled policy whose
// RSP selector matches. Nil when none does.
func (s *Snapshot) rebalancePolicy(rsp *fedschedv1a1.ReplicaSchedulingPreference) *v1alpha1.FailoverPolicy {
	var match []*v1alpha1.FailoverPolicy
	for i := range s.Policies {
		p := &s.Policies[i]
		if p.DeletionTimestamp == nil && p.Spec.Rebalance != nil && p.Spec.Rebalance.Enabled &&
			s.selectsRSP(p.Spec.Rebalance.ReplicaSchedulingPreferences, rsp) {
			match = append(match, p)
		}
	}
	if len(match) == 0 {
		return nil
	}
	slices.SortFunc(match, func(a, b *v1alpha1.FailoverPolicy) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return match[0]
}

func (s *Snapshot) selectsRSP(scope v1alpha1.PodScope, rsp *fedschedv1a1.ReplicaSchedulingPreference) bool {
	if !matches(scope.Selector, rsp.Labels) {
		return false
	}
	switch {
	case len(scope.Namespaces) > 0:
		return slices.Contains(scope.Namespaces, rsp.Namespace)
	case scope.NamespaceSelector != nil:
		return matches(scope.NamespaceSelector, s.NamespaceLabels[rsp.Namespace])
	}
	return true
}

// matches treats a nil selector as "everything" and an invalid one as
// "nothing", as the controllers do.
func matches(sel *metav1.LabelSelector, l map[string]string) bool {
	if sel == nil {
		return true
	}
	parsed, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && parsed.Matches(labels.Set(l))
}

// kubefedReady is the status of the KubeFedCluster's Ready condition.
func (s *Snapshot) kubefedReady(name string) string {
	k := s.cluster(name)
	if k == nil {
		return "Missing"
	}
	for _, c := range k.Status.Conditions {
		if c.Type == "Ready" {
			return string(c.Status)
		}
	}
	return string(corev1.ConditionUnknown)
}
