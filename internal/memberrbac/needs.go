// Package memberrbac is the one list of what fedfailover does in a member
// cluster: every request its member connections make, with the verb, the
// resource, the namespace and why. The least-privilege ClusterRole and
// Role (`kubectl failover member-rbac`, config/member), the table of
// docs/members.md and the checks of the controllers' unit tests are all
// made from it, so none can drift from the others.
package memberrbac

import (
	"fmt"
	"slices"
	"strings"
)

// The parts of fedfailover that make requests to members.
const (
	// ByMembers is controllers/member: the connection, its health probe
	// and the member cache.
	ByMembers = "member"
	// ByNodeRecovery is controllers/noderecovery.
	ByNodeRecovery = "noderecovery"
	// ByRebalance is controllers/rebalance.
	ByRebalance = "rebalance"
)

// EventsNamespace is where node recovery writes its Events about member
// Nodes (Nodes have no namespace; core/v1 Events of cluster-scoped objects
// go to default, as the kubelet's do).
const EventsNamespace = "default"

// Need is one permission fedfailover uses in every member.
type Need struct {
	// Group is the API group ("" for core).
	Group string
	// Resource is the resource's plural name.
	Resource string
	// NonResourceURLs are paths outside the resource API (Resource empty).
	NonResourceURLs []string
	Verbs           []string
	// Namespace limits the need to one namespace (a Role there); empty:
	// cluster-scoped resources, or every namespace (the ClusterRole).
	Namespace string
	// By is the part of fedfailover that needs it (ByMembers, ...).
	By string
	// Why says what the requests are for.
	Why string
}

// needs is the list. Keep it exact: the controllers' unit tests fail on a
// request to a member that no need covers, and on a need their requests no
// longer use.
var needs = []Need{
	{Resource: "nodes", Verbs: []string{"list", "watch"}, By: ByMembers,
		Why: "member cache; the health probe (a list of one Node's metadata every 2 s)"},
	{Resource: "pods", Verbs: []string{"list", "watch"}, By: ByMembers,
		Why: "member cache (pods per node, their claims and requests)"},
	{Group: "storage.k8s.io", Resource: "volumeattachments", Verbs: []string{"list", "watch"}, By: ByMembers,
		Why: "member cache (which volumes are attached to which node)"},
	{Group: "storage.k8s.io", Resource: "csidrivers", Verbs: []string{"list", "watch"}, By: ByMembers,
		Why: "member cache (which drivers attach volumes)"},
	{Group: "apps", Resource: "deployments", Verbs: []string{"list", "watch"}, By: ByMembers,
		Why: "member cache of workload owners, started by rebalance's first pass over the member (spec.replicas, revision, observed generation)"},
	{Group: "apps", Resource: "replicasets", Verbs: []string{"list", "watch"}, By: ByMembers,
		Why: "member cache of workload owners (each ReplicaSet's controller and revision)"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews", Verbs: []string{"create"}, By: ByMembers,
		Why: "re-checking a permission the member refused, so the condition clears once it is granted"},
	{NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/version"}, Verbs: []string{"get"}, By: ByMembers,
		Why: "the server version at connect; API discovery (also granted to every authenticated user by the default roles)"},

	{Resource: "nodes", Verbs: []string{"get"}, By: ByNodeRecovery,
		Why: "the live re-read of a Node before every destructive write"},
	{Resource: "nodes", Verbs: []string{"patch"}, By: ByNodeRecovery,
		Why: "adding and removing the out-of-service taint; removing the node annotations of older versions"},
	{Resource: "pods", Verbs: []string{"delete"}, By: ByNodeRecovery,
		Why: "force-deleting the pods of a fenced node"},
	{Group: "storage.k8s.io", Resource: "volumeattachments", Verbs: []string{"delete"}, By: ByNodeRecovery,
		Why: "detaching the volumes of a fenced node (`forceDelete` method)"},
	{Resource: "persistentvolumeclaims", Verbs: []string{"get"}, By: ByNodeRecovery,
		Why: "the volume of a tracked claim (taint removal, recovery check)"},
	{Resource: "namespaces", Verbs: []string{"list"}, By: ByNodeRecovery,
		Why: "`nodeRecovery.pods.namespaceSelector`"},
	{Resource: "events", Verbs: []string{"create"}, Namespace: EventsNamespace, By: ByNodeRecovery,
		Why: "Events about member Nodes"},
	{Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get"}, Namespace: "kube-node-lease", By: ByNodeRecovery,
		Why: "the kubelet Lease of a node whose Machine shows it off (`detection: Evidence`; one GET at a time, never cached)"},

	{Group: "apps", Resource: "deployments", Verbs: []string{"get"}, By: ByRebalance,
		Why: "the member Deployment of a federated workload, live until the owners' cache has synced"},
	{Group: "apps", Resource: "replicasets", Verbs: []string{"get", "list"}, By: ByRebalance,
		Why: "the Deployment's current ReplicaSet; the ReplicaSet of a FederatedReplicaSet (live until the owners' cache has synced)"},
}

// Needs returns every need, in the order of the list.
func Needs() []Need {
	out := make([]Need, len(needs))
	for i, n := range needs {
		n.Verbs = slices.Clone(n.Verbs)
		n.NonResourceURLs = slices.Clone(n.NonResourceURLs)
		out[i] = n
	}
	return out
}

// Permission is one request's authorization attributes, as the member's
// authorizer sees them.
type Permission struct {
	Verb string
	// Group, Resource ("pods", "pods/eviction" with a subresource) and
	// Namespace ("" for cluster-scoped resources and for every namespace)
	// of a resource request.
	Group, Resource, Namespace string
	// Path of a non-resource request (Resource empty).
	Path string
}

// String is the permission as `kubectl auth can-i` takes it: "patch
// nodes", "list volumeattachments.storage.k8s.io", "create events in
// namespace default", "get /version".
func (p Permission) String() string {
	if p.Resource == "" {
		return p.Verb + " " + p.Path
	}
	s := p.Verb + " " + p.Resource
	if p.Group != "" {
		res, sub, found := strings.Cut(p.Resource, "/")
		s = p.Verb + " " + res + "." + p.Group
		if found {
			s += "/" + sub
		}
	}
	if p.Namespace != "" {
		s += " in namespace " + p.Namespace
	}
	return s
}

// Covers reports whether the need grants p.
func (n Need) Covers(p Permission) bool {
	if !slices.Contains(n.Verbs, p.Verb) {
		return false
	}
	if p.Resource == "" {
		return slices.ContainsFunc(n.NonResourceURLs, func(u string) bool { return urlMatches(u, p.Path) })
	}
	return n.Resource == p.Resource && n.Group == p.Group && (n.Namespace == "" || n.Namespace == p.Namespace)
}

// Covered reports whether some need grants p: whether fedfailover's member
// role allows it.
func Covered(p Permission) bool {
	return slices.ContainsFunc(needs, func(n Need) bool { return n.Covers(p) })
}

// NeedsOf returns the needs of one part of fedfailover.
func NeedsOf(by string) []Need {
	return slices.DeleteFunc(Needs(), func(n Need) bool { return n.By != by })
}

// Permissions expands a need into one Permission per verb and URL.
func (n Need) Permissions() []Permission {
	var out []Permission
	for _, v := range n.Verbs {
		if n.Resource == "" {
			for _, u := range n.NonResourceURLs {
				out = append(out, Permission{Verb: v, Path: u})
			}
			continue
		}
		out = append(out, Permission{Verb: v, Group: n.Group, Resource: n.Resource, Namespace: n.Namespace})
	}
	return out
}

// urlMatches is RBAC's rule for non-resource URLs: exact, or a prefix
// ending in "*".
func urlMatches(rule, p string) bool {
	if prefix, ok := strings.CutSuffix(rule, "*"); ok {
		return strings.HasPrefix(p, prefix)
	}
	return rule == p
}

// what names a need's object for tables: `nodes`, `deployments.apps`,
// `/version`.
func (n Need) what() string {
	if n.Resource == "" {
		return strings.Join(n.NonResourceURLs, ", ")
	}
	if n.Group == "" {
		return n.Resource
	}
	return n.Resource + "." + n.Group
}

func (n Need) scope() string {
	if n.Namespace != "" {
		return fmt.Sprintf("Role in `%s`", n.Namespace)
	}
	return "ClusterRole"
}
