package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policy"
)

// DefaultKubefedNamespace holds KubeFedClusters unless told otherwise.
const DefaultKubefedNamespace = "kube-federation-system"

// Source says where to read the host cluster.
type Source struct {
	Reader client.Reader
	// KubefedNamespace holds the KubeFedClusters.
	KubefedNamespace string
	// Namespace limits RSPs to one namespace; empty means all.
	Namespace string
}

// Snapshot is everything the CLI reads from the host, at one time.
type Snapshot struct {
	Now      time.Time
	Policies []v1alpha1.FailoverPolicy
	Clusters []kubefedv1beta1.KubeFedCluster
	RSPs     []fedschedv1a1.ReplicaSchedulingPreference
	// Records are fedfailover's NodeRecovery records: the per-node history
	// of node recovery (active and finished losses).
	Records []v1alpha1.NodeRecovery
	// Guards are the members' RecoveryGuards: the storm state.
	Guards []v1alpha1.RecoveryGuard
	// Rebalances are the RSPs' RebalanceRecords: fedfailover's baseline
	// and timers of each RSP it manages (same namespace and name).
	Rebalances []v1alpha1.RebalanceRecord
	// NamespaceLabels holds the labels of RSP namespaces, read only when a
	// policy selects RSPs by namespace labels.
	NamespaceLabels map[string]map[string]string
}

// Gather lists policies, NodeRecovery records, RecoveryGuards,
// KubeFedClusters and RSPs from the host.
func Gather(ctx context.Context, src Source, now time.Time) (*Snapshot, error) {
	s := &Snapshot{Now: now}
	var pols v1alpha1.FailoverPolicyList
	if err := src.Reader.List(ctx, &pols); err != nil {
		return nil, Explain(err, resFailoverPolicies, "")
	}
	var recs v1alpha1.NodeRecoveryList
	if err := src.Reader.List(ctx, &recs); err != nil {
		return nil, Explain(err, resNodeRecoveries, "")
	}
	var guards v1alpha1.RecoveryGuardList
	if err := src.Reader.List(ctx, &guards); err != nil {
		return nil, Explain(err, resRecoveryGuards, "")
	}
	var rbrecs v1alpha1.RebalanceRecordList
	if err := src.Reader.List(ctx, &rbrecs, client.InNamespace(src.Namespace)); err != nil {
		return nil, Explain(err, resRebalanceRecords, src.Namespace)
	}
	var kfcs kubefedv1beta1.KubeFedClusterList
	if err := src.Reader.List(ctx, &kfcs, client.InNamespace(src.KubefedNamespace)); err != nil {
		return nil, Explain(err, resKubeFedClusters, src.KubefedNamespace)
	}
	var rsps fedschedv1a1.ReplicaSchedulingPreferenceList
	if err := src.Reader.List(ctx, &rsps, client.InNamespace(src.Namespace)); err != nil {
		return nil, Explain(err, resRSPs, src.Namespace)
	}
	s.Policies, s.Clusters, s.RSPs = pols.Items, kfcs.Items, rsps.Items
	s.Records, s.Guards, s.Rebalances = recs.Items, guards.Items, rbrecs.Items
	sortSnapshot(s)
	if policy.NeedNamespaceLabels(s.Policies) {
		if err := s.readNamespaceLabels(ctx, src.Reader); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func sortSnapshot(s *Snapshot) {
	slices.SortFunc(s.Policies, func(a, b v1alpha1.FailoverPolicy) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Clusters, func(a, b kubefedv1beta1.KubeFedCluster) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.RSPs, func(a, b fedschedv1a1.ReplicaSchedulingPreference) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	slices.SortFunc(s.Records, func(a, b v1alpha1.NodeRecovery) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Guards, func(a, b v1alpha1.RecoveryGuard) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(s.Rebalances, func(a, b v1alpha1.RebalanceRecord) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

func (s *Snapshot) readNamespaceLabels(ctx context.Context, r client.Reader) error {
	s.NamespaceLabels = map[string]map[string]string{}
	for i := range s.RSPs {
		ns := s.RSPs[i].Namespace
		if _, done := s.NamespaceLabels[ns]; done {
			continue
		}
		obj := &corev1.Namespace{}
		if err := r.Get(ctx, client.ObjectKey{Name: ns}, obj); client.IgnoreNotFound(err) != nil {
			return Explain(err, resNamespaces, "")
		}
		s.NamespaceLabels[ns] = obj.Labels
	}
	return nil
}

// Fingerprint changes whenever one of the objects read changes; --watch
// re-renders only then.
func (s *Snapshot) Fingerprint() string {
	var b strings.Builder
	for i := range s.Policies {
		fmt.Fprintf(&b, "p/%s@%s,", s.Policies[i].Name, s.Policies[i].ResourceVersion)
	}
	for i := range s.Clusters {
		fmt.Fprintf(&b, "c/%s@%s,", s.Clusters[i].Name, s.Clusters[i].ResourceVersion)
	}
	for i := range s.RSPs {
		fmt.Fprintf(&b, "r/%s/%s@%s,", s.RSPs[i].Namespace, s.RSPs[i].Name, s.RSPs[i].ResourceVersion)
	}
	for i := range s.Records {
		fmt.Fprintf(&b, "n/%s@%s,", s.Records[i].Name, s.Records[i].ResourceVersion)
	}
	for i := range s.Guards {
		fmt.Fprintf(&b, "g/%s@%s,", s.Guards[i].Name, s.Guards[i].ResourceVersion)
	}
	for i := range s.Rebalances {
		fmt.Fprintf(&b, "b/%s/%s@%s,", s.Rebalances[i].Namespace, s.Rebalances[i].Name, s.Rebalances[i].ResourceVersion)
	}
	return b.String()
}

// cluster returns the KubeFedCluster of that name, or nil.
func (s *Snapshot) cluster(name string) *kubefedv1beta1.KubeFedCluster {
	for i := range s.Clusters {
		if s.Clusters[i].Name == name {
			return &s.Clusters[i]
		}
	}
	return nil
}

func (s *Snapshot) clusterNames() []string {
	out := make([]string, 0, len(s.Clusters))
	for i := range s.Clusters {
		out = append(out, s.Clusters[i].Name)
	}
	return out
}
