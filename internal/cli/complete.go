package cli

import (
	"context"
	"slices"
	"strings"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MemberNames lists the member clusters the host knows, for shell
// completion: KubeFedClusters and members reported in a policy's status
// (a member that left may still be reported).
func (s *Snapshot) MemberNames() []string {
	names := s.clusterNames()
	for i := range s.Policies {
		for _, m := range s.Policies[i].Status.Members {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// NodeNames lists the nodes of a member that the host knows, for shell
// completion (the CLI never reads members): nodes of NodeRecovery
// records, nodes in policy status (recoveries, decisions) and the nodes of
// the member's Cluster API Machines.
func NodeNames(ctx context.Context, r client.Reader, s *Snapshot, cluster string) ([]string, error) {
	var names []string
	for i := range s.Records {
		if s.Records[i].Spec.Cluster == cluster {
			names = append(names, s.Records[i].Spec.Node)
		}
	}
	for i := range s.Policies {
		st := &s.Policies[i].Status
		for _, rec := range st.Recoveries {
			if rec.Cluster == cluster {
				names = append(names, rec.Node)
			}
		}
		for _, d := range st.RecentDecisions {
			if n, ok := strings.CutPrefix(d.Object, "Node/"); ok && d.Cluster == cluster {
				names = append(names, n)
			}
		}
	}
	machines, err := memberMachines(ctx, r, s, cluster)
	if err != nil {
		return nil, err
	}
	for n := range machines {
		names = append(names, n)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// memberMachines maps the member's nodes to their Machines as the
// controllers do (internal/capimap); no Cluster API, or no Cluster for the
// member, is no Machine, not an error; neither is a member whose Machines
// are in a management cluster (completion reads the host alone).
func memberMachines(ctx context.Context, r client.Reader, s *Snapshot, cluster string) (map[string]*clusterv1.Machine, error) {
	capi, cl, _, note, err := memberCAPICluster(ctx, MachineSource{Host: r}, s, cluster)
	if note != "" {
		return nil, nil
	}
	if err != nil {
		_, err := mappingNote(err, resClusters, "")
		return nil, err
	}
	ms, err := capi.MachinesByNode(ctx, cl)
	if err != nil {
		_, err := mappingNote(err, resMachines, cl.Namespace)
		return nil, err
	}
	return ms, nil
}
