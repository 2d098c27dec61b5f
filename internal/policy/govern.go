package policy

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Feature is the part of a policy a selection is for.
type Feature int

// Features.
const (
	NodeRecovery Feature = iota + 1
	Rebalance
)

// Unusable is a policy that has the feature enabled but a selector it needs
// cannot be parsed: it acts on nothing new.
type Unusable struct {
	Policy *v1alpha1.FailoverPolicy
	Err    error
}

// Selection says which policy governs one object (a member for node
// recovery, an RSP for rebalancing).
type Selection struct {
	// Governing is the policy that acts on the object: enabled, not being
	// deleted, selectors valid and matching; the oldest by
	// creationTimestamp, then the first by name. Nil when none.
	Governing *v1alpha1.FailoverPolicy
	// Overlapping are the other policies that select the object too, in
	// the same order; they lose to Governing.
	Overlapping []*v1alpha1.FailoverPolicy
	// Unusable are the enabled policies whose selectors cannot be parsed,
	// in the same order: nobody can tell whether they select the object.
	Unusable []Unusable
	// Held is set, for an RSP, when the policy recorded as managing it is
	// unusable and would outrank Governing: the RSP stays exactly as it is
	// (neither released nor handed over) until that policy is fixed or
	// disabled. Releasing mid-failover would put replicas back on a member
	// that may be down.
	Held *Unusable
}

// Compare orders policies for governance: oldest creationTimestamp first,
// then by name, so the choice is stable.
func Compare(a, b *v1alpha1.FailoverPolicy) int {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// ForMember selects the policy that governs node recovery in the member
// whose KubeFedCluster has these labels.
func ForMember(policies []v1alpha1.FailoverPolicy, clusterLabels map[string]string) Selection {
	return choose(policies, NodeRecovery, func(p *v1alpha1.FailoverPolicy) (bool, error) {
		clusters, err := Clusters(p)
		if err != nil {
			return false, err
		}
		if _, err := PodScope(p.Spec.NodeRecovery); err != nil {
			return false, err
		}
		if _, err := Nodes(p.Spec.NodeRecovery); err != nil {
			return false, err
		}
		return clusters.Matches(labels.Set(clusterLabels)), nil
	})
}

// ForRSP selects the policy that rebalances an RSP. owner is the policy
// recorded on the RSP as its manager ("" when none); see Selection.Held.
// rsp.NamespaceLabels must be set when NeedNamespaceLabels(policies).
func ForRSP(policies []v1alpha1.FailoverPolicy, rsp Object, owner string) Selection {
	s := choose(policies, Rebalance, func(p *v1alpha1.FailoverPolicy) (bool, error) {
		if _, err := Clusters(p); err != nil {
			return false, err
		}
		scope, err := RSPScope(p.Spec.Rebalance)
		if err != nil {
			return false, err
		}
		return scope.Matches(rsp), nil
	})
	for i := range s.Unusable {
		u := &s.Unusable[i]
		if u.Policy.Name == owner && (s.Governing == nil || Compare(u.Policy, s.Governing) < 0) {
			s.Held = u
		}
	}
	return s
}

// NeedNamespaceLabels says whether any policy selects RSPs by the labels
// of their namespace, so ForRSP needs them.
func NeedNamespaceLabels(policies []v1alpha1.FailoverPolicy) bool {
	for i := range policies {
		if rb := policies[i].Spec.Rebalance; rb != nil && rb.ReplicaSchedulingPreferences.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// Enabled reports whether the policy has the feature on and is not being
// deleted.
func Enabled(p *v1alpha1.FailoverPolicy, f Feature) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	switch f {
	case NodeRecovery:
		return p.Spec.NodeRecovery.On()
	case Rebalance:
		return p.Spec.Rebalance.On()
	}
	return false
}

// choose applies the governance rule with matches deciding, per enabled
// policy, whether it selects the object (an error: it cannot tell).
func choose(policies []v1alpha1.FailoverPolicy, f Feature, matches func(*v1alpha1.FailoverPolicy) (bool, error)) Selection {
	var s Selection
	var winners []*v1alpha1.FailoverPolicy
	for i := range policies {
		p := &policies[i]
		// A policy being deleted governs nothing new; its finalizers only
		// wind down what it started.
		if !Enabled(p, f) || p.DeletionTimestamp != nil {
			continue
		}
		ok, err := matches(p)
		switch {
		case err != nil:
			s.Unusable = append(s.Unusable, Unusable{Policy: p, Err: err})
		case ok:
			winners = append(winners, p)
		}
	}
	slices.SortFunc(winners, Compare)
	slices.SortFunc(s.Unusable, func(a, b Unusable) int { return Compare(a.Policy, b.Policy) })
	if len(winners) > 0 {
		s.Governing, s.Overlapping = winners[0], winners[1:]
	}
	return s
}

// Member is a member cluster as the governance rule sees it.
type Member struct {
	Name   string
	Labels map[string]string
}

// Overlaps lists, for each member where p would recover nodes but another
// policy governs node recovery, "member: governed by winner". Empty when p
// governs every member it selects (or has node recovery off).
func Overlaps(p *v1alpha1.FailoverPolicy, all []v1alpha1.FailoverPolicy, members []Member) []string {
	if !Enabled(p, NodeRecovery) {
		return nil
	}
	var out []string
	for _, m := range members {
		sel := ForMember(all, m.Labels)
		if sel.Governing == nil || sel.Governing.Name == p.Name {
			continue
		}
		for _, o := range sel.Overlapping {
			if o.Name == p.Name {
				out = append(out, m.Name+": governed by "+sel.Governing.Name)
			}
		}
	}
	return out
}
