package noderecovery

import (
	"context"

	"k8s.io/apimachinery/pkg/version"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/controllers/member"
)

// memberAccess is what node recovery uses of the member cache: a
// *member.Cache in production, a fake in unit tests of the apply steps.
type memberAccess interface {
	GetClient(ctx context.Context, cluster string) (client.Client, error)
	// GetUncachedClient reads from the member's API server: the live re-read
	// before every destructive write.
	GetUncachedClient(ctx context.Context, cluster string) (client.Client, error)
	ServerVersion(cluster string) (*version.Info, error)
	MachinesByNode(ctx context.Context, cluster string) (map[string]*clusterv1.Machine, error)
	// MachineClients reach the API server that holds the member's Machines
	// (the host's, or its management cluster's): the live re-read of a
	// Machine, MachineHealthChecks and the Machine deletion go there.
	MachineClients(ctx context.Context, cluster string) (member.MachineClients, error)
	Watch(ctx context.Context, cluster string, in member.WatchInput) error
	ConnectedClusters() []string
	KubeFedCluster(ctx context.Context, cluster string) (*kubefedv1beta1.KubeFedCluster, error)
	// HoldsMember is false while another replica owns the member (sharding):
	// checked in the live re-check before every destructive write.
	HoldsMember(cluster string) bool
}

var _ memberAccess = (*member.Cache)(nil)
