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

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/capimap"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// Cluster API objects are read from the host cluster, in every namespace,
// unless a member's KubeFedCluster names a management cluster (see
// management.go): those credentials are the management cluster's own.
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch

// Errors of the Cluster API mapping.
var (
	ErrNoCAPICluster   = capimap.ErrNoCluster
	ErrNoMachine       = capimap.ErrNoMachine
	ErrCAPIUnavailable = errors.New("the host cluster has no Cluster API CRDs")
)

// capi maps members to Cluster API objects in the host cluster or in their
// management cluster, with the rules of internal/capimap (shared with
// `kubectl failover explain`).
type capi struct {
	kubefed    client.Reader  // the kubefed namespace
	host       capimap.Reader // the manager's cache, Machines indexed
	hostLive   client.Reader  // the host API server
	hostWriter client.Client
	mgmt       *management
	ns         string
	enabled    bool // the host has the Cluster API CRDs
}

// CAPICluster returns the Cluster API Cluster of a member (see
// capimap.Reader.Cluster), in the host or in the member's management
// cluster.
func (c *Cache) CAPICluster(ctx context.Context, member string) (types.NamespacedName, error) {
	_, cl, err := c.capiCluster(ctx, member)
	return cl, err
}

func (c *Cache) capiCluster(ctx context.Context, member string) (capimap.Reader, types.NamespacedName, error) {
	kfc := &kubefedv1beta1.KubeFedCluster{}
	if err := c.capi.kubefed.Get(ctx, types.NamespacedName{Namespace: c.capi.ns, Name: member}, kfc); err != nil {
		return capimap.Reader{}, types.NamespacedName{}, fmt.Errorf("getting KubeFedCluster %q: %w", member, err)
	}
	r, _, err := c.machineSource(ctx, kfc)
	if err != nil {
		return capimap.Reader{}, types.NamespacedName{}, err
	}
	cl, err := r.Cluster(ctx, capimap.MemberOf(kfc))
	return r, cl, err
}

// MachineForNode returns the Machine whose status.nodeRef is the member's Node.
func (c *Cache) MachineForNode(ctx context.Context, member, node string) (*clusterv1.Machine, error) {
	r, cl, err := c.capiCluster(ctx, member)
	if err != nil {
		return nil, err
	}
	m, err := r.MachineForNode(ctx, cl, node)
	if err != nil {
		return nil, fmt.Errorf("member %q: %w", member, err)
	}
	return m, nil
}

// MachinesByNode returns the member's Machines that have a Node, by Node name.
func (c *Cache) MachinesByNode(ctx context.Context, member string) (map[string]*clusterv1.Machine, error) {
	r, cl, err := c.capiCluster(ctx, member)
	if err != nil {
		return nil, err
	}
	return r.MachinesByNode(ctx, cl)
}

// CAPIProblem is a member whose Cluster API Cluster cannot be trusted, so
// none of its Machines is used as evidence (see capimap.Reader.Cluster).
type CAPIProblem struct {
	Member string
	Err    *capimap.ClusterError
}

// CAPIProblems checks the Cluster API mapping of each KubeFedCluster and
// returns the members whose Cluster is ambiguous, unverified or missing, or
// whose management cluster cannot be used now (reason
// ManagementClusterUnavailable), by name. A member with no Cluster at all
// is not a problem (it is not managed by Cluster API); neither is a member
// of a host without Cluster API (ErrCAPIUnavailable says so when no member
// names a management cluster either). Other errors (reads that failed) are
// returned.
func (c *Cache) CAPIProblems(ctx context.Context, kfcs []kubefedv1beta1.KubeFedCluster) ([]CAPIProblem, error) {
	var out []CAPIProblem
	managed := false
	for i := range kfcs {
		kfc := &kfcs[i]
		_, inManagement, _ := contract.DecodeCAPIManagementCluster(kfc.Annotations)
		if !inManagement && !c.capi.enabled {
			continue
		}
		managed = true
		r, mc, err := c.machineSource(ctx, kfc)
		if err == nil {
			_, err = r.Cluster(ctx, capimap.MemberOf(kfc))
		}
		var ce *capimap.ClusterError
		var me *ManagementError
		switch {
		case errors.As(err, &me):
			out = append(out, CAPIProblem{Member: kfc.Name, Err: &capimap.ClusterError{Member: kfc.Name,
				Reason: v1alpha1.ReasonManagementClusterUnavailable, Message: me.Error(), Err: me}})
		case errors.As(err, &ce):
			if mc.Management != "" {
				ce = &capimap.ClusterError{Member: ce.Member, Reason: ce.Reason, Err: ce.Err,
					Message: fmt.Sprintf("in its management cluster (kubeconfig Secret %s): %s", mc.Management, ce.Message)}
			}
			out = append(out, CAPIProblem{Member: kfc.Name, Err: ce})
		case err == nil, errors.Is(err, capimap.ErrNoCluster): // mapped, or no Cluster at all
		default:
			return nil, err
		}
	}
	if !managed {
		return nil, ErrCAPIUnavailable
	}
	slices.SortFunc(out, func(a, b CAPIProblem) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}
