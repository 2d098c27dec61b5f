package cli

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policy"
)

// policyMembers lists the KubeFedClusters a policy selects, sorted; none
// when its clusterSelector is invalid (the policy acts on nothing new).
func (s *Snapshot) policyMembers(p *v1alpha1.FailoverPolicy) []string {
	sel, err := policy.Clusters(p)
	if err != nil {
		return nil
	}
	var out []string
	for i := range s.Clusters {
		if sel.Matches(labels.Set(s.Clusters[i].Labels)) {
			out = append(out, s.Clusters[i].Name)
		}
	}
	return out
}

// rebalancePolicy selects the policy that manages an RSP with the rebalance
// controller's rule (internal/policy.ForRSP).
func (s *Snapshot) rebalancePolicy(rsp *fedschedv1a1.ReplicaSchedulingPreference) policy.Selection {
	owner := ""
	if base, err := s.baselineOf(rsp); err == nil && base.recorded != nil {
		owner = base.recorded.Policy
	}
	obj := policy.Object{Labels: rsp.Labels, Namespace: rsp.Namespace, NamespaceLabels: s.NamespaceLabels[rsp.Namespace]}
	return policy.ForRSP(s.Policies, obj, owner)
}

// recoveryPolicy selects the policy that governs node recovery in a member
// with the node recovery controller's rule (internal/policy.ForMember).
func (s *Snapshot) recoveryPolicy(cluster string) policy.Selection {
	var l map[string]string
	if k := s.cluster(cluster); k != nil {
		l = k.Labels
	}
	return policy.ForMember(s.Policies, l)
}

// kubefedMissing is a member's KubefedReady when it has no KubeFedCluster.
const kubefedMissing = "Missing"

// kubefedReady is the status of the KubeFedCluster's Ready condition.
func (s *Snapshot) kubefedReady(name string) string {
	k := s.cluster(name)
	if k == nil {
		return kubefedMissing
	}
	for _, c := range k.Status.Conditions {
		if c.Type == "Ready" {
			return string(c.Status)
		}
	}
	return string(corev1.ConditionUnknown)
}
