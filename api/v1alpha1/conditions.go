package v1alpha1

// Condition types of a FailoverPolicy. Each is written by one controller
// with its own server-side apply field manager; Ready summarises the others.
const (
	// ConditionReady is True when the policy is valid and enforced; False,
	// with the reason of what stops it, while a selector is invalid, no
	// member is selected, a storm suspends recovery, a lost node waits
	// for fencing evidence or a member refuses a request of fedfailover's.
	ConditionReady = "Ready"
	// ConditionMembersConnected is True when every selected member is connected.
	ConditionMembersConnected = "MembersConnected"
	// ConditionStormActive is True while a member has more lost nodes than maxUnhealthy.
	ConditionStormActive = "StormActive"
	// ConditionFencingBlocked is True while a lost node cannot be recovered for lack of evidence.
	ConditionFencingBlocked = "FencingBlocked"
	// ConditionRemediating is True while a lost node waits for a remediation
	// (nodeRecovery.remediation: a fence agent requested by fedfailover, or
	// another party's); the message names the node, the remediation and
	// since when.
	ConditionRemediating = "Remediating"
	// ConditionRebalancing is True while a managed ReplicaSchedulingPreference
	// is away from its baseline (or held); its reason is the placement.
	ConditionRebalancing = "Rebalancing"
	// ConditionTaintRemovalPending is True while an out-of-service taint that
	// fedfailover added cannot be removed yet: the node is Ready but a
	// tracked volume is still attached to it, or the member cannot be
	// reached; the message names the node and why.
	ConditionTaintRemovalPending = "TaintRemovalPending"
	// ConditionRebalanceSuspended is True while a safety rule holds some
	// managed ReplicaSchedulingPreference as it is (too many members failed
	// at once, no capacity anywhere, or replicas on a member only
	// fedfailover sees failed); the message names the RSPs and the members.
	ConditionRebalanceSuspended = "RebalanceSuspended"
	// ConditionOverlapping is True while another policy governs node recovery
	// in some of the members this one selects; the message names the winner.
	ConditionOverlapping = "Overlapping"
	// ConditionMachineEvidenceUnavailable is True while, for some selected
	// member, a Cluster API Cluster may be the member's but cannot be shown
	// to be, or the member's management cluster cannot be read (its reason
	// says why, the message names the member): no Machine evidence is used
	// for that member's nodes. Reported only by policies with node recovery
	// enabled.
	ConditionMachineEvidenceUnavailable = "MachineEvidenceUnavailable"
	// ConditionFailoverReady (N+1 readiness) is True while, for every
	// managed ReplicaSchedulingPreference and every member, the other
	// members have room for the RSP's replicas if that member failed now;
	// False naming the worst member and RSP and how many replicas would
	// stay Pending; Unknown while a member's room is unknown (unobserved)
	// or an RSP is held. An estimate from capacity.Fit (requests against
	// allocatable). Reported only by policies with rebalancing enabled.
	ConditionFailoverReady = "FailoverReady"
	// ConditionMemberPermissionDenied is True while a selected member
	// refuses (403) requests fedfailover makes with its credentials there;
	// the message names each member and each refused permission (verb,
	// resource, namespace). What needs the permission fails until it is
	// granted (docs/members.md, least-privilege mode).
	ConditionMemberPermissionDenied = "MemberPermissionDenied"
)

// Reasons of the MemberPermissionDenied condition.
const (
	// ReasonMemberPermissionDenied: True; the message names the members
	// and what each refused.
	ReasonMemberPermissionDenied = "MemberPermissionDenied"
	// ReasonNoPermissionDenied: False; no selected member refuses a
	// request of fedfailover's.
	ReasonNoPermissionDenied = "NoPermissionDenied"
)

// Reasons of the FailoverReady condition.
const (
	// ReasonFailuresAbsorbed: True; any one member's failure now would
	// leave no replica of a managed RSP without room.
	ReasonFailuresAbsorbed = "FailuresAbsorbed"
	// ReasonFailoverShortfall: False; some member's failure now would
	// leave replicas of a managed RSP Pending (the message names the worst
	// member, RSP and shortfall).
	ReasonFailoverShortfall = "FailoverShortfall"
	// ReasonReadinessUnknown: Unknown; some member's room is unknown
	// (fedfailover cannot read it now) or a managed RSP is held, and no
	// known shortfall makes it False.
	ReasonReadinessUnknown = "ReadinessUnknown"
)

// Reasons of the MachineEvidenceUnavailable condition (and of the
// internal/capimap errors behind it).
const (
	// ReasonCAPIClusterAmbiguous: several Clusters have the member's (or the
	// annotation's bare) name, and no single one has the KubeFedCluster's
	// apiEndpoint as its controlPlaneEndpoint.
	ReasonCAPIClusterAmbiguous = "CAPIClusterAmbiguous"
	// ReasonCAPIClusterUnverified: one Cluster merely has the member's name:
	// its controlPlaneEndpoint is not the KubeFedCluster's apiEndpoint, and no
	// annotation names it.
	ReasonCAPIClusterUnverified = "CAPIClusterUnverified"
	// ReasonCAPIClusterNotFound: the failover.fedfailover.io/capi-cluster
	// annotation names a Cluster that does not exist.
	ReasonCAPIClusterNotFound = "CAPIClusterNotFound"
	// ReasonCAPIClusterAnnotationInvalid: the annotation is malformed.
	ReasonCAPIClusterAnnotationInvalid = "CAPIClusterAnnotationInvalid"
	// ReasonManagementClusterUnavailable: the member's KubeFedCluster names
	// a management cluster (annotation
	// failover.fedfailover.io/capi-management-cluster) whose Cluster API
	// objects cannot be read now: the annotation or its Secret is invalid,
	// the cluster does not answer, or its credentials or permissions fail.
	// No Machine evidence is used for the member meanwhile: never a fence.
	ReasonManagementClusterUnavailable = "ManagementClusterUnavailable"
	// ReasonCAPIClustersResolved: False; every selected member has one
	// verified Cluster, or none at all (or the host has no Cluster API).
	ReasonCAPIClustersResolved = "CAPIClustersResolved"
)

// Reasons of the Overlapping condition.
const (
	// ReasonOverlapping: an older policy (then first by name) wins there.
	ReasonOverlapping = "OverlappingPolicies"
	ReasonNoOverlap   = "NoOverlap"
)

// Reasons of the Ready condition. When Ready is False its reason is the
// reason of the condition (or selector) that stops the policy, one of the
// constants below.
const (
	// ReasonEnforcing: Ready=True, nothing stops the policy.
	ReasonEnforcing = "Enforcing"
	// ReasonPaused: spec.paused stops every write of the policy.
	ReasonPaused = "Paused"
	// ReasonInvalidSelector: a label selector of the spec cannot be parsed;
	// the message names the field. The policy acts on nothing new.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonShardedRebalance: the manager shards members across replicas
	// (--shard), and a replica sees only the members it holds: rebalance
	// is not planned on a partial view, the RSP is held (docs/scale.md).
	ReasonShardedRebalance = "ShardedRebalanceUnsupported"
)

// Reasons of the MembersConnected condition.
const (
	ReasonAllConnected        = "AllConnected"
	ReasonMembersNotConnected = "MembersNotConnected"
	// ReasonNoMembers: no KubeFedCluster matches spec.clusterSelector.
	ReasonNoMembers = "NoMembers"
	// ReasonListFailed: the KubeFedClusters could not be read (status Unknown).
	ReasonListFailed = "ListFailed"
)

// Reasons of the StormActive condition.
const (
	ReasonStormActive = "StormActive"
	ReasonNoStorm     = "NoStorm"
)

// Reasons of the Remediating condition.
const (
	ReasonRemediationPending   = "RemediationPending"
	ReasonNoRemediationPending = "NoRemediationPending"
)

// Reasons of the FencingBlocked condition.
const (
	ReasonNoFencingEvidence = "NoFencingEvidence"
	ReasonNoBlockedNodes    = "NoBlockedNodes"
)

// Reasons of the Rebalancing condition: the placement of the policy's
// RSPs, the first that applies to any of them in this order.
const (
	// ReasonRebalanceHeld: an RSP the policy manages is left as it is
	// because the policy's selectors cannot be parsed.
	ReasonRebalanceHeld = "Held"
	// ReasonShifted: replicas are moved away from a member that is failed
	// or out of capacity now.
	ReasonShifted = "Shifted"
	// ReasonMemberMaintenance: replicas are moved off a member under an
	// accepted MemberMaintenance (or kept off it until it ends).
	ReasonMemberMaintenance = "MemberMaintenance"
	// ReasonFailingBack: shifted, but every member is healthy again: the
	// placement is returning to the baseline.
	ReasonFailingBack = "FailingBack"
	// ReasonReleasing: no policy manages an RSP the policy shifted any
	// more (rebalancing turned off, the policy deleted, or its selector no
	// longer matching): its baseline is being given back, stepwise, where
	// kubefed alone would put replicas now.
	ReasonReleasing = "Releasing"
	// ReasonAtBaseline: every managed RSP is at its baseline (False).
	ReasonAtBaseline = "AtBaseline"
	// ReasonStateMissing (a status.rebalances entry of a held RSP, and the
	// event): the RSP has no RebalanceRecord, and spec fields fedfailover's
	// field manager alone wrote (its own pins) are on it: the shifted spec
	// is not taken as the baseline, the RSP is left as it is.
	ReasonStateMissing = "StateMissing"
)

// Reasons of the TaintRemovalPending condition.
const (
	// ReasonTaintStays: some taint of fedfailover's waits; see the message.
	ReasonTaintStays = "TaintStays"
	// ReasonNoTaintLeft: no taint of fedfailover's waits for removal.
	ReasonNoTaintLeft = "NoTaintLeft"
)

// Reasons of the RebalanceSuspended condition. True: the first that
// applies to any managed RSP in this order.
const (
	// ReasonTooManyMembersFailed: more selected members look failed than
	// spec.rebalance.maxFailedMembers: no RSP is shifted.
	ReasonTooManyMembersFailed = "TooManyMembersFailed"
	// ReasonNoCapacityAnywhere: a plan would leave no replica runnable
	// anywhere: kubefed keeps what it has.
	ReasonNoCapacityAnywhere = "NoCapacityAnywhere"
	// ReasonMemberFailureUnconfirmed: a member holding replicas has been
	// unreachable to fedfailover for clusterFailedAfter, but kubefed's own
	// health check reports it Ready (or its report is stale): its replicas
	// stay until kubefed agrees.
	ReasonMemberFailureUnconfirmed = "MemberFailureUnconfirmed"
	// ReasonNotSuspended: no managed RSP is held by the guard (False).
	ReasonNotSuspended = "NotSuspended"
)
