package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

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
	return c.capi.host.Cluster(ctx, capimap.MemberOf(kfc))
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

// CAPIProblem is a member whose Cluster API Cluster cannot be trusted, so
// none of its Machines is used as evidence (see capimap.Reader.Cluster).
type CAPIProblem struct {
	Member string
	Err    *capimap.ClusterError
}

// CAPIProblems checks the Cluster API mapping of each KubeFedCluster and
// returns the members whose Cluster is ambiguous, unverified or missing, by
// name. A member with no Cluster at all is not a problem (it is not managed
// by Cluster API); neither is a host without Cluster API (ErrCAPIUnavailable
// says so). Other errors (reads that failed) are returned.
func (c *Cache) CAPIProblems(ctx context.Context, kfcs []kubefedv1beta1.KubeFedCluster) ([]CAPIProblem, error) {
	if !c.capi.enabled {
		return nil, ErrCAPIUnavailable
	}
	var out []CAPIProblem
	for i := range kfcs {
		_, err := c.capi.host.Cluster(ctx, capimap.MemberOf(&kfcs[i]))
		var ce *capimap.ClusterError
		switch {
		case errors.As(err, &ce):
			out = append(out, CAPIProblem{Member: kfcs[i].Name, Err: ce})
		case err == nil, errors.Is(err, capimap.ErrNoCluster): // mapped, or no Cluster at all
		default:
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b CAPIProblem) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}
