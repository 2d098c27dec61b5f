// Package contract defines, once, every format fedfailover keeps on
// objects: the failover.fedfailover.io/* annotation keys and their codecs.
// Controllers write them; the CLI, the benchmarks and the tests read them.
// It imports only API types and apimachinery, so a reader of these formats
// never links a controller.
package contract

// Prefix starts every annotation key fedfailover owns.
const Prefix = "failover.fedfailover.io/"

// Node marks, on member Nodes (see NodeMarks).
const (
	// AnnotationLostSince is when the node stopped being Ready (RFC 3339).
	AnnotationLostSince = "failover.fedfailover.io/lost-since"
	// AnnotationFencedBy is the fencing evidence the action relied on.
	AnnotationFencedBy = "failover.fedfailover.io/fenced-by"
	// AnnotationFencedAt is when the action was taken (RFC 3339).
	AnnotationFencedAt = "failover.fedfailover.io/fenced-at"
	// AnnotationAction is the recovery method applied.
	AnnotationAction = "failover.fedfailover.io/action"
	// AnnotationTaintedBy is "true" when fedfailover added the out-of-service
	// taint: only then does it remove it.
	AnnotationTaintedBy = "failover.fedfailover.io/tainted-by-fedfailover"
	// AnnotationClaims lists, comma-separated, the namespace/claim of the
	// in-scope pods that were on the node when it was fenced.
	AnnotationClaims = "failover.fedfailover.io/claims"
	// AnnotationRecoveredAt is when every tracked claim ran elsewhere again.
	AnnotationRecoveredAt = "failover.fedfailover.io/recovered-at"
)

// TaintLost is the key of the NoSchedule taint fedfailover puts on a member
// node before it force-deletes the node's pods while the node still reports
// Ready (method ForceDelete, the node lost by evidence): no node lifecycle
// taint keeps the member's scheduler away from such a node yet. Its value
// is the UID of the NodeRecovery record that owns it (status.lostTaint);
// fedfailover removes only that exact taint.
const TaintLost = "failover.fedfailover.io/lost"

// AnnotationStorm on a member's KubeFedCluster holds the storm guard's
// state (JSON, see Storm); absent means no storm.
const AnnotationStorm = "failover.fedfailover.io/storm"

// AnnotationRebalance on a ReplicaSchedulingPreference held, in older
// fedfailovers, everything the rebalance controller must remember across
// restarts (JSON, see RebalanceState). It is legacy: read once, as a hint,
// to seed the RSP's RebalanceRecord, then removed; never written.
const AnnotationRebalance = "failover.fedfailover.io/rebalance"

// AnnotationCAPICluster on a KubeFedCluster names the member's Cluster API
// Cluster when it is not the Cluster of the member's name: "namespace/name",
// or a bare name (see CAPIClusterRef).
const AnnotationCAPICluster = "failover.fedfailover.io/capi-cluster"

// AnnotationCAPIManagementCluster on a KubeFedCluster says that the
// member's Cluster API objects (its Cluster, its Machines) live in a
// management cluster, not in the host: its value is the name of a Secret in
// the KubeFedCluster's own namespace (the kubefed namespace) holding a
// kubeconfig of that cluster (see DecodeCAPIManagementCluster). Only a
// name: a reference to another namespace is never followed.
const AnnotationCAPIManagementCluster = "failover.fedfailover.io/capi-management-cluster"

// FinalizerNodeRecovery on a FailoverPolicy with node recovery: before the
// policy goes, its NodeRecovery records that prove a taint is fedfailover's
// are cleaned up or released from its ownership.
const FinalizerNodeRecovery = "failover.fedfailover.io/node-recovery"

// Remediation objects fedfailover creates from a remediation template (one
// per loss, in the host) carry the member and node they are about, for the
// remediator and for humans; the node's Machine, when the host holds it,
// too.
// Labels hold only what fits a label value; the annotations always hold
// the full names.
const (
	// AnnotationRemediationCluster is the member (KubeFedCluster name).
	AnnotationRemediationCluster = "failover.fedfailover.io/cluster"
	// AnnotationRemediationNode is the member Node's name.
	AnnotationRemediationNode = "failover.fedfailover.io/node"
	// AnnotationRemediationNodeUID is the member Node's UID.
	AnnotationRemediationNodeUID = "failover.fedfailover.io/node-uid"
	// AnnotationRemediationProviderID is the Node's spec.providerID.
	AnnotationRemediationProviderID = "failover.fedfailover.io/provider-id"
	// AnnotationRemediationMachine is the node's Cluster API Machine
	// (namespace/name), when it has one in the host (never one of a
	// management cluster: its names mean nothing in the host).
	AnnotationRemediationMachine = "failover.fedfailover.io/machine"
	// LabelRemediationCluster and LabelRemediationNode repeat the member
	// and node when they are valid label values (selection, kubectl -l).
	LabelRemediationCluster = "failover.fedfailover.io/cluster"
	LabelRemediationNode    = "failover.fedfailover.io/node"
	// LabelManagedBy is the well-known label, valued ManagedByValue.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "fedfailover"
)

// AnnotationCredentialsSecret on a KubeFedCluster names a Secret, in the
// kubefed namespace, whose `token` fedfailover uses for that member
// instead of the one of kubefed's `spec.secretRef` (least-privilege mode,
// see docs/members.md). Only a bare name: a reference never leaves the
// kubefed namespace, and the endpoint, CA and TLS options stay the
// KubeFedCluster's.
const AnnotationCredentialsSecret = "failover.fedfailover.io/credentials-secret"

// LabelCredentialsFor must be on the Secret AnnotationCredentialsSecret
// names, with the KubeFedCluster's name as its value: whoever creates the
// Secret says which member its token is for, so an annotation alone cannot
// send one member's token to another member's endpoint.
const LabelCredentialsFor = "failover.fedfailover.io/credentials-for"
