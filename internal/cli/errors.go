package cli

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// resource names what the CLI reads, for error messages.
type resource struct {
	// Name is resource.group as RBAC and `kubectl get` spell it.
	Name string
	// Install says how to get the CRD when it is missing.
	Install string
}

var (
	resFailoverPolicies = resource{"failoverpolicies.failover.fedfailover.io",
		"install fedfailover's CRDs: `kubectl apply -f config/crd/bases` (from the fedfailover repository) or `helm install fedfailover charts/fedfailover`"}
	resNodeRecoveries     = resource{"noderecoveries.failover.fedfailover.io", resFailoverPolicies.Install}
	resRecoveryGuards     = resource{"recoveryguards.failover.fedfailover.io", resFailoverPolicies.Install}
	resRebalanceRecords   = resource{"rebalancerecords.failover.fedfailover.io", resFailoverPolicies.Install}
	resMemberMaintenances = resource{"membermaintenances.failover.fedfailover.io", resFailoverPolicies.Install}
	resKubeFedClusters    = resource{"kubefedclusters.core.kubefed.io",
		"install kubefed v0.10 in the host cluster (its chart's CRDs) and register members with `kubefedctl join`"}
	resRSPs = resource{"replicaschedulingpreferences.scheduling.kubefed.io",
		"install kubefed v0.10 in the host cluster (its chart's CRDs)"}
	resClusters = resource{"clusters.cluster.x-k8s.io",
		"install the Cluster API CRDs in the host cluster"}
	resMachines = resource{"machines.cluster.x-k8s.io",
		"install the Cluster API CRDs in the host cluster"}
	resNamespaces = resource{"namespaces", ""}
)

// HostResources are all the resources the CLI reads from the host cluster,
// as resource.group: the viewer ClusterRole (config/rbac/viewer_role.yaml,
// the chart's rbac.viewer) grants get, list and watch on exactly these.
func HostResources() []string {
	return []string{resFailoverPolicies.Name, resNodeRecoveries.Name, resRecoveryGuards.Name, resRebalanceRecords.Name,
		resMemberMaintenances.Name, resKubeFedClusters.Name, resRSPs.Name, resClusters.Name, resMachines.Name, resNamespaces.Name}
}

// ErrCRDMissing is wrapped by errors about a CRD that is not installed.
var ErrCRDMissing = errors.New("CRD not installed in the host cluster")

// ErrForbidden is wrapped by errors about missing RBAC permissions.
var ErrForbidden = errors.New("forbidden")

// Explain turns an API error from reading res into a message that says
// what to do: install a CRD, ask for permission, fix credentials.
func Explain(err error, res resource, namespace string) error {
	where := "cluster-wide"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	switch {
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err) && res.Install != "":
		return fmt.Errorf("%w: %s is not served by the host cluster; %s", ErrCRDMissing, res.Name, res.Install)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%w: you may not list %s %s in the host cluster; ask for get/list/watch permission on %s: %w",
			ErrForbidden, res.Name, where, res.Name, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the host cluster rejected your credentials (401) while reading %s: check the user in your kubeconfig: %w", res.Name, err)
	}
	return fmt.Errorf("reading %s %s from the host cluster: %w", res.Name, where, err)
}

func isCRDMissing(err error) bool { return errors.Is(err, ErrCRDMissing) }
