// Package capimap maps a kubefed member to its Cluster API Cluster in the
// host cluster, and the member's Nodes to their Machines. The member cache
// (for the controllers) and `kubectl failover explain` both call it, so
// they cannot disagree; the rules for a missing or ambiguous answer live
// here only.
package capimap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// Errors of the mapping.
var (
	ErrNoCluster = errors.New("no Cluster API Cluster for member")
	ErrNoMachine = errors.New("no Machine for node")
)

// MachineClusterField is the field index Reader.Indexed relies on: Machines
// by "<namespace>/<spec.clusterName>".
const MachineClusterField = "fedfailover.machine.cluster"

// MachineClusterValues is the index function of MachineClusterField.
func MachineClusterValues(o client.Object) []string {
	m := o.(*clusterv1.Machine)
	return []string{m.Namespace + "/" + m.Spec.ClusterName}
}

// IndexMachines adds MachineClusterField to a cache.
func IndexMachines(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &clusterv1.Machine{}, MachineClusterField, MachineClusterValues)
}

// Reader reads Clusters and Machines from the host cluster.
type Reader struct {
	client.Reader
	// Indexed says the reader is a cache with MachineClusterField: then only
	// the Cluster's Machines are listed. Otherwise the Machines of its
	// namespace are listed and filtered here; the answer is the same.
	Indexed bool
}

// Cluster returns the Cluster API Cluster of a member, given the
// annotations of its KubeFedCluster: the Cluster that
// contract.AnnotationCAPICluster names as "namespace/name" (it must exist),
// else the only Cluster, in any namespace, with the annotation's bare name
// or, without the annotation, the member's name.
func (r Reader) Cluster(ctx context.Context, member string, annotations map[string]string) (types.NamespacedName, error) {
	ref, set, err := contract.DecodeCAPICluster(annotations)
	if err != nil {
		return types.NamespacedName{}, fmt.Errorf("%w %q: %w", ErrNoCluster, member, err)
	}
	if set && ref.Namespace != "" {
		key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		if err := r.Get(ctx, key, &clusterv1.Cluster{}); err != nil {
			return types.NamespacedName{}, fmt.Errorf("%w %q: annotation %s=%q: %w", ErrNoCluster, member, contract.AnnotationCAPICluster, ref, err)
		}
		return key, nil
	}
	name := member
	if set {
		name = ref.Name
	}
	var list clusterv1.ClusterList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return types.NamespacedName{}, fmt.Errorf("listing Cluster API Clusters: %w", err)
	}
	return onlyCluster(member, name, list.Items)
}

// onlyCluster is the Cluster named name when exactly one namespace has one.
func onlyCluster(member, name string, clusters []clusterv1.Cluster) (types.NamespacedName, error) {
	var found []types.NamespacedName
	for i := range clusters {
		if clusters[i].Name == name {
			found = append(found, client.ObjectKeyFromObject(&clusters[i]))
		}
	}
	switch len(found) {
	case 0:
		return types.NamespacedName{}, fmt.Errorf("%w %q: no Cluster named %q", ErrNoCluster, member, name)
	case 1:
		return found[0], nil
	}
	slices.SortFunc(found, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	return types.NamespacedName{}, fmt.Errorf("%w %q: Clusters %v all match; set annotation %s=namespace/name",
		ErrNoCluster, member, found, contract.AnnotationCAPICluster)
}

// MachinesByNode returns the Machines of Cluster cl that have a Node, by
// Node name.
func (r Reader) MachinesByNode(ctx context.Context, cl types.NamespacedName) (map[string]*clusterv1.Machine, error) {
	opts := []client.ListOption{client.InNamespace(cl.Namespace)}
	if r.Indexed {
		opts = append(opts, client.MatchingFields{MachineClusterField: cl.Namespace + "/" + cl.Name})
	}
	var list clusterv1.MachineList
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing Machines of %s: %w", cl, err)
	}
	return byNode(cl, list.Items), nil
}

// MachineForNode returns the Machine of Cluster cl whose status.nodeRef is
// node: the one MachinesByNode maps it to.
func (r Reader) MachineForNode(ctx context.Context, cl types.NamespacedName, node string) (*clusterv1.Machine, error) {
	ms, err := r.MachinesByNode(ctx, cl)
	if err != nil {
		return nil, err
	}
	if m := ms[node]; m != nil {
		return m, nil
	}
	return nil, fmt.Errorf("%w %q in Cluster %s", ErrNoMachine, node, cl)
}

// byNode maps Node names to the Machines of cl in machines. Two Machines
// claiming one Node: the first by name wins (the cache used to decide, in
// no particular order).
func byNode(cl types.NamespacedName, machines []clusterv1.Machine) map[string]*clusterv1.Machine {
	out := make(map[string]*clusterv1.Machine, len(machines))
	for i := range machines {
		m := &machines[i]
		n := m.Status.NodeRef.Name
		if m.Namespace != cl.Namespace || m.Spec.ClusterName != cl.Name || n == "" {
			continue
		}
		if prev, ok := out[n]; ok && prev.Name < m.Name {
			continue
		}
		out[n] = m
	}
	return out
}
