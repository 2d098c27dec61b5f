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
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
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

// Member is what the mapping knows of a kubefed member: its
// KubeFedCluster's name, annotations and spec.apiEndpoint.
type Member struct {
	Name        string
	Annotations map[string]string
	APIEndpoint string
}

// MemberOf is the Member of a KubeFedCluster.
func MemberOf(kfc *kubefedv1beta1.KubeFedCluster) Member {
	return Member{Name: kfc.Name, Annotations: kfc.Annotations, APIEndpoint: kfc.Spec.APIEndpoint}
}

// ClusterError says why a Cluster that may be the member's cannot be used:
// no Machine evidence is taken from it. Reason is one of the v1alpha1
// ReasonCAPICluster* constants. It is an ErrNoCluster.
type ClusterError struct {
	Member  string
	Reason  string
	Message string
	Err     error // the cause, if any (e.g. the API's NotFound)
}

func (e *ClusterError) Error() string {
	return fmt.Sprintf("%s %q: %s", ErrNoCluster, e.Member, e.Message)
}

// Unwrap makes a ClusterError an ErrNoCluster and keeps its cause.
func (e *ClusterError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNoCluster}
	}
	return []error{ErrNoCluster, e.Err}
}

// Cluster returns the Cluster API Cluster of a member. Names are not
// identity: anyone allowed to create Clusters in some namespace can create
// one with a member's name. So a Cluster is the member's only when
//   - contract.AnnotationCAPICluster names it as "namespace/name" (it must
//     exist), or
//   - it is the only Cluster with the annotation's bare name, or
//   - without the annotation, it is the only Cluster with the member's name
//     and its spec.controlPlaneEndpoint is the member's apiEndpoint.
//
// Two Clusters with the name are ambiguous, whatever their endpoints.
//
// Otherwise the error is a *ClusterError saying why (ambiguous, unverified,
// missing), except when no Cluster has the name at all: then it is a plain
// ErrNoCluster (the member is not managed by Cluster API).
func (r Reader) Cluster(ctx context.Context, m Member) (types.NamespacedName, error) {
	ref, set, err := contract.DecodeCAPICluster(m.Annotations)
	if err != nil {
		return types.NamespacedName{}, &ClusterError{Member: m.Name, Reason: v1alpha1.ReasonCAPIClusterAnnotationInvalid, Message: err.Error(), Err: err}
	}
	if set && ref.Namespace != "" {
		key := types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		err := r.Get(ctx, key, &clusterv1.Cluster{})
		switch {
		case apierrors.IsNotFound(err):
			return types.NamespacedName{}, &ClusterError{Member: m.Name, Reason: v1alpha1.ReasonCAPIClusterNotFound,
				Message: fmt.Sprintf("annotation %s=%q names a Cluster that does not exist", contract.AnnotationCAPICluster, ref), Err: err}
		case err != nil:
			// A failed read says nothing about the Cluster: not an ErrNoCluster.
			return types.NamespacedName{}, fmt.Errorf("reading Cluster %s named by annotation %s of member %q: %w", ref, contract.AnnotationCAPICluster, m.Name, err)
		}
		return key, nil
	}
	name := m.Name
	if set {
		name = ref.Name
	}
	var list clusterv1.ClusterList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return types.NamespacedName{}, fmt.Errorf("listing Cluster API Clusters: %w", err)
	}
	return choose(m, name, set, list.Items)
}

// candidate is a Cluster with the wanted name and its normalised endpoint.
type candidate struct {
	key      types.NamespacedName
	endpoint string // "(none)" when it has no host
	matches  bool   // it is the member's apiEndpoint
}

func (c candidate) String() string {
	return fmt.Sprintf("%s (controlPlaneEndpoint %s)", c.key, c.endpoint)
}

// choose applies the rule of Cluster to the Clusters named name.
func choose(m Member, name string, annotated bool, clusters []clusterv1.Cluster) (types.NamespacedName, error) {
	want, wantOK := memberEndpoint(m.APIEndpoint)
	var named []candidate
	for i := range clusters {
		if clusters[i].Name != name {
			continue
		}
		got, ok := clusterEndpoint(clusters[i].Spec.ControlPlaneEndpoint)
		named = append(named, candidate{key: client.ObjectKeyFromObject(&clusters[i]), endpoint: describeEndpoint(got, ok),
			matches: ok && wantOK && got == want})
	}
	slices.SortFunc(named, func(a, b candidate) int { return strings.Compare(a.key.String(), b.key.String()) })
	fix := fmt.Sprintf("no Machine evidence is used for the member until annotation %s=namespace/name on its KubeFedCluster names its Cluster",
		contract.AnnotationCAPICluster)
	switch {
	case len(named) == 0 && annotated:
		return types.NamespacedName{}, &ClusterError{Member: m.Name, Reason: v1alpha1.ReasonCAPIClusterNotFound,
			Message: fmt.Sprintf("annotation %s=%q names no existing Cluster", contract.AnnotationCAPICluster, name)}
	case len(named) == 0:
		return types.NamespacedName{}, fmt.Errorf("%w %q: no Cluster named %q", ErrNoCluster, m.Name, name)
	case len(named) > 1:
		// Two candidates are never resolved silently, not even by the
		// endpoint: whoever can create a Cluster in some namespace can copy
		// an endpoint as easily as a name.
		parts := make([]string, 0, len(named))
		for _, c := range named {
			parts = append(parts, c.String())
		}
		return types.NamespacedName{}, &ClusterError{Member: m.Name, Reason: v1alpha1.ReasonCAPIClusterAmbiguous,
			Message: fmt.Sprintf("%d Clusters are named %q: %s; the KubeFedCluster's apiEndpoint is %s; two candidates are ambiguous, whatever their endpoints; %s",
				len(named), name, strings.Join(parts, ", "), describeEndpoint(want, wantOK), fix)}
	case annotated, named[0].matches:
		// The only Cluster of the name the admin gave, or of the member's
		// name with the member's endpoint.
		return named[0].key, nil
	}
	return types.NamespacedName{}, &ClusterError{Member: m.Name, Reason: v1alpha1.ReasonCAPIClusterUnverified,
		Message: fmt.Sprintf("Cluster %s merely has the member's name: the KubeFedCluster's apiEndpoint is %s; %s (or the endpoints match)",
			named[0], describeEndpoint(want, wantOK), fix)}
}

// memberEndpoint is the host:port of a KubeFedCluster apiEndpoint URL: the
// host in lower case, the scheme's default port when none is given.
func memberEndpoint(apiEndpoint string) (string, bool) {
	raw := apiEndpoint
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}

// clusterEndpoint is the host:port of a Cluster's controlPlaneEndpoint
// (port 443 when unset); false when it has no host.
func clusterEndpoint(e clusterv1.APIEndpoint) (string, bool) {
	if e.Host == "" {
		return "", false
	}
	port := e.Port
	if port == 0 {
		port = 443
	}
	host := strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(e.Host, "["), "]"))
	return net.JoinHostPort(host, strconv.Itoa(int(port))), true
}

func describeEndpoint(e string, ok bool) string {
	if !ok {
		return "(none)"
	}
	return e
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
