package member

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/capimap"
)

// Cluster API objects are read from the host cluster, in every namespace.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch

// Errors of the Cluster API mapping.
var (
	ErrNoCAPICluster   = capimap.ErrNoCluster
	ErrNoMachine       = capimap.ErrNoMachine
	ErrCAPIUnavailable = errors.New("the host cluster has no Cluster API CRDs")
)

// capi maps members to Cluster API objects in the host cluster, with the
// rules of internal/capimap (shared with `kubectl failover explain`).
type capi struct {
	kubefed client.Reader  // the kubefed namespace
	host    capimap.Reader // the manager's cache, Machines indexed
	ns      string
	enabled bool
}

// CAPICluster returns the Cluster API Cluster of a member (see
// capimap.Reader.Cluster).
func (c *Cache) CAPICluster(ctx context.Context, member string) (types.NamespacedName, error) {
	if !c.capi.enabled {
		return types.NamespacedName{}, ErrCAPIUnavailable
	}
	kfc := &kubefedv1beta1.KubeFedCluster{}
	if err := c.capi.kubefed.Get(ctx, types.NamespacedName{Namespace: c.capi.ns, Name: member}, kfc); err != nil {
		return types.NamespacedName{}, fmt.Errorf("getting KubeFedCluster %q: %w", member, err)
	}
	return c.capi.host.Cluster(ctx, member, kfc.Annotations)
}

// MachineForNode returns the Machine whose status.nodeRef is the member's Node.
func (c *Cache) MachineForNode(ctx context.Context, member, node string) (*clusterv1.Machine, error) {
	cl, err := c.CAPICluster(ctx, member)
	if err != nil {
		return nil, err
	}
	m, err := c.capi.host.MachineForNode(ctx, cl, node)
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", member, err)
	}
	return m, nil
}

// MachinesByNode returns the member's Machines that have a Node, by Node name.
func (c *Cache) MachinesByNode(ctx context.Context, member string) (map[string]*clusterv1.Machine, error) {
	cl, err := c.CAPICluster(ctx, member)
	if err != nil {
		return nil, err
	}
	return c.capi.host.MachinesByNode(ctx, cl)
}
