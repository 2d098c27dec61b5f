package member

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
)

// Cluster API objects are read from the host cluster, in every namespace.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch

// Errors of the Cluster API mapping.
var (
	ErrNoCAPICluster   = errors.New("no Cluster API Cluster for member")
	ErrNoMachine       = errors.New("no Machine for node")
	ErrCAPIUnavailable = errors.New("the host cluster has no Cluster API CRDs")
)

const (
	// machineClusterIndex indexes Machines by "<namespace>/<spec.clusterName>".
	machineClusterIndex = "fedfailover.machine.cluster"
	// machineNodeIndex indexes Machines by "<namespace>/<spec.clusterName>/<status.nodeRef.name>".
	machineNodeIndex = "fedfailover.machine.node"
)

func indexMachineCluster(o client.Object) []string {
	m := o.(*clusterv1.Machine)
	return []string{m.Namespace + "/" + m.Spec.ClusterName}
}

func indexMachineNode(o client.Object) []string {
	m := o.(*clusterv1.Machine)
	if m.Status.NodeRef.Name == "" {
		return nil
	}
	return []string{m.Namespace + "/" + m.Spec.ClusterName + "/" + m.Status.NodeRef.Name}
}

// capi maps members to Cluster API objects in the host cluster.
type capi struct {
	kubefed client.Reader // the kubefed namespace
	host    client.Reader // the manager's cache, Machines indexed
	ns      string
	enabled bool
}

// CAPICluster returns the Cluster API Cluster of a member: the one named by
// the CAPIClusterAnnotation ("namespace/name") on its KubeFedCluster, or else
// the only Cluster with the member's name in any namespace.
func (c *Cache) CAPICluster(ctx context.Context, member string) (types.NamespacedName, error) {
	if !c.capi.enabled {
		return types.NamespacedName{}, ErrCAPIUnavailable
	}
	kfc := &kubefedv1beta1.KubeFedCluster{}
	if err := c.capi.kubefed.Get(ctx, types.NamespacedName{Namespace: c.capi.ns, Name: member}, kfc); err != nil {
		return types.NamespacedName{}, fmt.Errorf("getting KubeFedCluster %q: %w", member, err)
	}
	name := member
	if a := kfc.Annotations[CAPIClusterAnnotation]; a != "" {
		if ns, n, ok := strings.Cut(a, "/"); ok {
			cl := &clusterv1.Cluster{}
			key := types.NamespacedName{Namespace: ns, Name: n}
			if err := c.capi.host.Get(ctx, key, cl); err != nil {
				return types.NamespacedName{}, fmt.Errorf("%w %q: annotation %s=%q: %w", ErrNoCAPICluster, member, CAPIClusterAnnotation, a, err)
			}
			return key, nil
		}
		name = a
	}
	var list clusterv1.ClusterList
	if err := c.capi.host.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return types.NamespacedName{}, fmt.Errorf("listing Cluster API Clusters: %w", err)
	}
	var found []types.NamespacedName
	for i := range list.Items {
		if list.Items[i].Name == name {
			found = append(found, client.ObjectKeyFromObject(&list.Items[i]))
		}
	}
	switch len(found) {
	case 0:
		return types.NamespacedName{}, fmt.Errorf("%w %q: no Cluster named %q", ErrNoCAPICluster, member, name)
	case 1:
		return found[0], nil
	}
	return types.NamespacedName{}, fmt.Errorf("%w %q: Clusters %v all match; set annotation %s=namespace/name",
		ErrNoCAPICluster, member, found, CAPIClusterAnnotation)
}

// MachineForNode returns the Machine whose status.nodeRef is the member's Node.
func (c *Cache) MachineForNode(ctx context.Context, member, node string) (*clusterv1.Machine, error) {
	cl, err := c.CAPICluster(ctx, member)
	if err != nil {
		return nil, err
	}
	var list clusterv1.MachineList
	if err := c.capi.host.List(ctx, &list, client.InNamespace(cl.Namespace),
		client.MatchingFields{machineNodeIndex: cl.Namespace + "/" + cl.Name + "/" + node}); err != nil {
		return nil, fmt.Errorf("listing Machines of %s: %w", cl, err)
	}
	switch len(list.Items) {
	case 0:
		return nil, fmt.Errorf("%w %q in member %q (Cluster %s)", ErrNoMachine, node, member, cl)
	case 1:
		return &list.Items[0], nil
	}
	return nil, fmt.Errorf("%d Machines of Cluster %s claim node %q", len(list.Items), cl, node)
}

// MachinesByNode returns the member's Machines that have a Node, by Node name.
func (c *Cache) MachinesByNode(ctx context.Context, member string) (map[string]*clusterv1.Machine, error) {
	cl, err := c.CAPICluster(ctx, member)
	if err != nil {
		return nil, err
	}
	var list clusterv1.MachineList
	if err := c.capi.host.List(ctx, &list, client.InNamespace(cl.Namespace),
		client.MatchingFields{machineClusterIndex: cl.Namespace + "/" + cl.Name}); err != nil {
		return nil, fmt.Errorf("listing Machines of %s: %w", cl, err)
	}
	out := make(map[string]*clusterv1.Machine, len(list.Items))
	for i := range list.Items {
		if n := list.Items[i].Status.NodeRef.Name; n != "" {
			out[n] = &list.Items[i]
		}
	}
	return out, nil
}
