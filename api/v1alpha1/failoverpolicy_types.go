package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// FailoverPolicySpec says which member clusters fedfailover looks after and how.
// +kubebuilder:validation:XValidation:rule="has(self.nodeRecovery) || has(self.rebalance)",message="at least one of nodeRecovery or rebalance must be set"
type FailoverPolicySpec struct {
	// ClusterSelector selects member clusters by the labels of their KubeFedCluster
	// objects. Empty or absent selects every joined member.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions[].values must be non-empty for In and NotIn and empty for Exists and DoesNotExist",fieldPath=".matchExpressions"
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// NodeRecovery recovers pods with PersistentVolumes from lost nodes inside a
	// member. Absent means node recovery is off for the selected members.
	// +optional
	NodeRecovery *NodeRecoverySpec `json:"nodeRecovery,omitempty"`

	// Rebalance shifts kubefed ReplicaSchedulingPreference weights away from
	// members that failed or ran out of capacity, and back when they recover.
	// Absent means rebalancing is off.
	// +optional
	Rebalance *RebalanceSpec `json:"rebalance,omitempty"`

	// DryRun makes every decision and reports it in status and events, but
	// changes nothing in any cluster.
	// +optional
	// +kubebuilder:default=false
	DryRun bool `json:"dryRun,omitempty"`

	// Paused stops, at once, every write this policy makes to member
	// clusters and to ReplicaSchedulingPreferences: no taint, no deletion,
	// no cleanup, no RSP change (shifted RSPs stay as they are, nothing is
	// released). Unlike dryRun it decides nothing new; status and events on
	// the host say that the policy is paused. Unpause to resume.
	// +optional
	// +kubebuilder:default=false
	Paused bool `json:"paused,omitempty"`
}

// RecoveryMethod is how pods are released from a fenced node.
// +kubebuilder:validation:Enum=Auto;OutOfServiceTaint;ForceDelete
type RecoveryMethod string

const (
	// RecoveryMethodAuto uses the out-of-service taint on members whose API
	// server is 1.28 or newer and ForceDelete on older ones.
	RecoveryMethodAuto RecoveryMethod = "Auto"
	// RecoveryMethodOutOfServiceTaint applies node.kubernetes.io/out-of-service.
	RecoveryMethodOutOfServiceTaint RecoveryMethod = "OutOfServiceTaint"
	// RecoveryMethodForceDelete deletes the node's in-scope pods with grace
	// period 0 and then its VolumeAttachments.
	RecoveryMethodForceDelete RecoveryMethod = "ForceDelete"
)

// NodeRecoverySpec configures detection, fencing and recovery of lost nodes.
// +kubebuilder:validation:XValidation:rule="!has(self.fencing) || !has(self.fencing.assumeFencedAfter) || duration(self.fencing.assumeFencedAfter) >= duration(self.notReadyFor)",message="fencing.assumeFencedAfter must not be shorter than notReadyFor",fieldPath=".fencing.assumeFencedAfter"
type NodeRecoverySpec struct {
	// Enabled turns node recovery on or off without deleting its settings
	// (default true).
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// NotReadyFor is how long a node's Ready condition must be other than True,
	// counted from its last transition, before the node counts as lost.
	// +optional
	// +kubebuilder:default="60s"
	NotReadyFor Duration `json:"notReadyFor,omitempty"`

	// Detection is how a node is found lost. Evidence (the default): as
	// soon as its Cluster API Machine carries positive fencing evidence that
	// the machine is off (infrastructure deleted, a powered-off condition)
	// and fedfailover's own readings show the node's kubelet Lease in
	// kube-node-lease not renewed for one renew interval plus a margin,
	// without waiting for the Ready condition to flip or for notReadyFor; a
	// node lost that way still needs the same fencing verdict, storm guard
	// and every other gate. NotReady: only a Ready condition other than True
	// for notReadyFor makes a node lost.
	// +optional
	// +kubebuilder:default=Evidence
	Detection NodeLossDetection `json:"detection,omitempty"`

	// Fencing says which evidence proves that a lost node is really off.
	// Without such evidence fedfailover never releases a node's volumes.
	// +optional
	// +kubebuilder:default={machineInfrastructureDeleted: true}
	Fencing FencingSpec `json:"fencing,omitempty"`

	// Method is how pods are released once a node is fenced.
	// +optional
	// +kubebuilder:default=Auto
	Method RecoveryMethod `json:"method,omitempty"`

	// MaxUnhealthy stops all recovery in a member while more of its nodes than
	// this (a count, or a percentage of the member's nodes) are lost at once:
	// many nodes failing together is more likely a network or control-plane
	// problem than many dead machines.
	// +optional
	// +kubebuilder:default="40%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a non-negative integer or a percentage from 0% to 100%"
	MaxUnhealthy *intstr.IntOrString `json:"maxUnhealthy,omitempty"`

	// StormCooldown is how long a storm must be over (lost nodes back within
	// maxUnhealthy) before recovery resumes in that member.
	// +optional
	// +kubebuilder:default="5m"
	StormCooldown Duration `json:"stormCooldown,omitempty"`

	// Pods limits which pods on a fenced node are force-deleted (ForceDelete
	// method) and tracked until their replacements run.
	// +optional
	Pods PodScope `json:"pods,omitempty"`

	// NodeSelector limits which member Nodes (by their labels) node recovery
	// may act on. Absent means every node except control-plane nodes (those
	// labelled node-role.kubernetes.io/control-plane): their loss is the
	// control plane's business. An empty selector ({}) selects every node.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions[].values must be non-empty for In and NotIn and empty for Exists and DoesNotExist",fieldPath=".matchExpressions"
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Remediation asks an external remediator (a fence agent) to fence a
	// node that is lost without fencing evidence (not Ready for notReadyFor,
	// no Machine evidence): fedfailover stamps the template's spec.template
	// into one remediation object per loss, in the template's namespace,
	// and waits for its Succeeded=True condition (or for Machine evidence)
	// before it recovers the node, with the same live re-check before the
	// taint as for any other evidence. Succeeded=False, or no success within
	// the timeout, leaves the recovery Blocked: nothing destructive is done.
	// The storm guard, pause and dry run apply before a remediation is
	// requested. The installation must enable the remediation kind (chart
	// value nodeRecovery.remediation.kinds, which grants the RBAC).
	// +optional
	Remediation *RemediationSpec `json:"remediation,omitempty"`
}

// RemediationSpec names the remediation template and how long to wait.
type RemediationSpec struct {
	// Template is the remediation template in the host cluster, as in the
	// NodeHealthCheck and Cluster API external remediation convention: an
	// object of kind <Kind>Template whose spec.template (metadata labels and
	// annotations, spec) is stamped into a remediation object of kind
	// <Kind> for each lost node.
	Template RemediationTemplateReference `json:"template"`

	// Timeout is how long fedfailover waits for the remediation to report
	// Succeeded=True, counted from its request on fedfailover's own clock.
	// Past it, the recovery is Blocked for the rest of the loss (the
	// record's status.remediation.result is TimedOut).
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('5s') && duration(self) <= duration('24h')",message="must be between 5s and 24h"
	Timeout Duration `json:"timeout,omitempty"`
}

// RemediationTemplateReference names a remediation template object in the
// host cluster.
// +structType=atomic
type RemediationTemplateReference struct {
	// APIVersion is the template's group/version, e.g.
	// fence-agents-remediation.medik8s.io/v1alpha1 (the core group has no
	// remediation kinds).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`

	// Kind is the template's kind; it ends in Template, and the
	// remediation objects are of the kind without that suffix (e.g.
	// FenceAgentsRemediationTemplate -> FenceAgentsRemediation).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*[A-Za-z0-9]Template$`
	Kind string `json:"kind"`

	// Name of the template.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Namespace of the template; the remediation objects are created there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
}

// RemediationKind is the kind of the remediation objects the template
// stamps: its kind without the Template suffix.
func (r RemediationTemplateReference) RemediationKind() string {
	return strings.TrimSuffix(r.Kind, "Template")
}

// FencingSpec lists the evidence that counts as proof that a node is off.
// Each kind of evidence is independent; any one of them is enough.
// +kubebuilder:validation:XValidation:rule="(has(self.machineInfrastructureDeleted) && self.machineInfrastructureDeleted) || (has(self.poweredOffConditions) && size(self.poweredOffConditions) > 0) || has(self.externalFenceAnnotation) || has(self.assumeFencedAfter)",message="no fencing evidence is enabled: enable machineInfrastructureDeleted, poweredOffConditions, externalFenceAnnotation or assumeFencedAfter"
// +kubebuilder:validation:XValidation:rule="!has(self.requestMachineDeletion) || !self.requestMachineDeletion || (has(self.machineInfrastructureDeleted) && self.machineInfrastructureDeleted)",message="requestMachineDeletion needs machineInfrastructureDeleted: deleting a Machine only fences a node once its infrastructure is gone",fieldPath=".requestMachineDeletion"
type FencingSpec struct {
	// MachineInfrastructureDeleted accepts a Cluster API Machine that is being
	// deleted and whose infrastructure is reported gone (or a Node that was
	// deleted together with its Machine's infrastructure) as proof.
	// +optional
	// +kubebuilder:default=true
	MachineInfrastructureDeleted bool `json:"machineInfrastructureDeleted"`

	// PoweredOffConditions are Machine conditions that mean "powered off" for
	// infrastructure providers that report power state.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	PoweredOffConditions []MachineConditionMatch `json:"poweredOffConditions,omitempty"`

	// ExternalFenceAnnotation is an annotation key that a fencing agent sets,
	// once it has fenced the node, to the time it did so (RFC 3339, e.g.
	// "2026-01-02T03:04:05Z"), on the object externalFenceSource names. The
	// mark counts only when that time is at or after the start of the
	// node's current loss, so a mark left from an earlier incident never
	// fences. A value without a time (such as "true") never counts.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	ExternalFenceAnnotation string `json:"externalFenceAnnotation,omitempty"`

	// ExternalFenceSource is where externalFenceAnnotation is read: Machine
	// (the default) reads the node's Cluster API Machine in the host cluster;
	// its time is compared with when fedfailover saw the loss begin. Node
	// reads the member Node itself, compared with the Node's Ready transition
	// time. A Node annotation is FORGEABLE by anyone with nodes/patch in the
	// member (the node's own kubelet, any DaemonSet, a mistaken kubectl
	// annotate): choose Node only when no such writer can be an attacker.
	// +optional
	// +kubebuilder:default=Machine
	ExternalFenceSource ExternalFenceSource `json:"externalFenceSource,omitempty"`

	// AssumeFencedAfter treats a node lost for this long as fenced without any
	// evidence. UNSAFE unless every node runs a watchdog that powers it off when
	// it loses its control plane for less than this long: a partitioned node
	// that is still running would keep writing to volumes that another node
	// now mounts.
	// +optional
	AssumeFencedAfter *Duration `json:"assumeFencedAfter,omitempty"`

	// RequestMachineDeletion lets fedfailover delete the Machine of a lost node
	// (as a MachineHealthCheck would) to obtain fencing through infrastructure
	// deletion. Never done for a Machine owned by a MachineHealthCheck or an
	// external remediation, and only where the installation enables it (the
	// manager's --enable-machine-deletion, chart value
	// nodeRecovery.machineDeletion.enabled, which also grants the RBAC).
	// +optional
	// +kubebuilder:default=false
	RequestMachineDeletion bool `json:"requestMachineDeletion,omitempty"`
}

// NodeLossDetection is how node recovery finds a node lost.
// +kubebuilder:validation:Enum=Evidence;NotReady
type NodeLossDetection string

// Ways a node is found lost.
const (
	// NodeLossDetectionEvidence: positive fencing evidence on the node's
	// Machine and its kubelet Lease not renewed, as fedfailover reads it;
	// or, as with NotReady, its Ready condition.
	NodeLossDetectionEvidence NodeLossDetection = "Evidence"
	// NodeLossDetectionNotReady: a Ready condition other than True for
	// notReadyFor, and nothing else.
	NodeLossDetectionNotReady NodeLossDetection = "NotReady"
)

// ExternalFenceSource is the object the external fence annotation is read from.
// +kubebuilder:validation:Enum=Machine;Node
type ExternalFenceSource string

// External fence sources.
const (
	// ExternalFenceSourceMachine: the node's Cluster API Machine (host cluster).
	ExternalFenceSourceMachine ExternalFenceSource = "Machine"
	// ExternalFenceSourceNode: the member Node (forgeable by node-level writers).
	ExternalFenceSourceNode ExternalFenceSource = "Node"
)

// MachineConditionMatch matches a Cluster API Machine condition.
type MachineConditionMatch struct {
	// Type is the condition type, e.g. "PowerOn".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`

	// Status is the condition status that means powered off.
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status metav1.ConditionStatus `json:"status"`

	// Reasons, when set, also require one of these reasons.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	Reasons []string `json:"reasons,omitempty"`
}

// PodScope selects pods by namespace and labels.
// +kubebuilder:validation:XValidation:rule="!(has(self.namespaces) && has(self.namespaceSelector))",message="namespaces and namespaceSelector are mutually exclusive"
type PodScope struct {
	// Namespaces lists namespaces by name (DNS-1123 labels). Empty means all
	// namespaces.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelector selects namespaces by label.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions[].values must be non-empty for In and NotIn and empty for Exists and DoesNotExist",fieldPath=".matchExpressions"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// Selector selects pods by label. Absent selects every pod.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 : !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions[].values must be non-empty for In and NotIn and empty for Exists and DoesNotExist",fieldPath=".matchExpressions"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// RebalanceSpec configures cross-member ReplicaSchedulingPreference shifting.
// +kubebuilder:validation:XValidation:rule="!has(self.failback) || !has(self.failback.stabilizationWindow) || duration(self.failback.stabilizationWindow) >= duration(self.minInterval)",message="failback.stabilizationWindow must not be shorter than minInterval",fieldPath=".failback.stabilizationWindow"
type RebalanceSpec struct {
	// Enabled turns rebalancing on or off without deleting its settings
	// (default true).
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// ReplicaSchedulingPreferences selects the RSPs to manage. Their
	// spec.clusters as the user wrote it is the baseline fedfailover returns to.
	// +optional
	ReplicaSchedulingPreferences PodScope `json:"replicaSchedulingPreferences,omitempty"`

	// CapacityExhaustedAfter is how long a workload's pods in a member must be
	// Unschedulable before the member counts as out of capacity for it.
	// +optional
	// +kubebuilder:default="10s"
	CapacityExhaustedAfter Duration `json:"capacityExhaustedAfter,omitempty"`

	// ClusterFailedAfter is how long a member must be disconnected or not Ready
	// in kubefed before its replicas are moved elsewhere.
	// +optional
	// +kubebuilder:default="20s"
	ClusterFailedAfter Duration `json:"clusterFailedAfter,omitempty"`

	// Failback controls the return to the baseline once a member recovers.
	// +optional
	// +kubebuilder:default={}
	Failback FailbackSpec `json:"failback,omitempty"`

	// MinInterval is the least time between two changes of the same RSP,
	// except when a member fails.
	// +optional
	// +kubebuilder:default="30s"
	MinInterval Duration `json:"minInterval,omitempty"`

	// MaxFailedMembers is the federation guard: while more of the selected
	// members than this (a count, or a percentage of them) look failed at
	// once, no RSP is changed at all. Many members failing together is more
	// likely a problem of fedfailover's own view (its network, its
	// credentials) than many dead clusters, and kubefed alone then does
	// better than any shift.
	// +optional
	// +kubebuilder:default="50%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9]?[0-9])%$')",message="must be a non-negative integer or a percentage from 0% to 100%"
	MaxFailedMembers *intstr.IntOrString `json:"maxFailedMembers,omitempty"`

	// AllowSpill lets a shift give a member more replicas than the
	// maxReplicas of its baseline preferences when the others cannot run
	// them. Off: maxReplicas is a hard cap. Members the RSP does not list
	// (and no "*" entry) never get replicas either way.
	// +optional
	AllowSpill bool `json:"allowSpill,omitempty"`

	// Placement is when a member is capped for lack of room. Predictive
	// (the default): as soon as the capacity estimate says the member
	// cannot hold what the RSP assigns it (its bound replicas plus what
	// fits), before its new replicas pend; the Unschedulable signal
	// (capacityExhaustedAfter) stays the safety net for estimates that
	// were wrong. Reactive: only on that signal.
	// +optional
	// +kubebuilder:default=Predictive
	// +kubebuilder:validation:Enum=Predictive;Reactive
	Placement PlacementMode `json:"placement,omitempty"`
}

// PlacementMode is when rebalance caps a member for lack of room.
type PlacementMode string

// Placement modes.
const (
	// PlacementPredictive caps a member from the capacity estimate.
	PlacementPredictive PlacementMode = "Predictive"
	// PlacementReactive caps a member only once its replicas are
	// Unschedulable for capacityExhaustedAfter.
	PlacementReactive PlacementMode = "Reactive"
)

// Predictive reports whether the policy caps members from the capacity
// estimate; unset (a policy stored before the field) is the default.
func (s RebalanceSpec) Predictive() bool { return s.Placement != PlacementReactive }

// FailbackSpec controls how replicas return to a recovered member.
type FailbackSpec struct {
	// StabilizationWindow is how long a member must be healthy with room
	// before replicas move back to it.
	// +optional
	// +kubebuilder:default="2m"
	StabilizationWindow Duration `json:"stabilizationWindow,omitempty"`

	// MaxStep is the most replicas moved back to a member per minInterval.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxStep int32 `json:"maxStep,omitempty"`

	// MakeBeforeBreak raises totalReplicas temporarily so a returning member's
	// pods are Ready before the other members shrink.
	// +optional
	// +kubebuilder:default=true
	MakeBeforeBreak bool `json:"makeBeforeBreak"`
}

// FailoverPolicyStatus is the observed state of a FailoverPolicy.
type FailoverPolicyStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, MembersConnected, StormActive, FencingBlocked,
	// Rebalancing, RebalanceSuspended, FailoverReady, and more (see
	// conditions.go).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ConnectedMembers counts selected members that are connected.
	// +optional
	ConnectedMembers int32 `json:"connectedMembers,omitempty"`

	// Members summarises each selected member cluster.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Members []MemberStatus `json:"members,omitempty"`

	// Recoveries lists node recoveries in progress or blocked.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Recoveries []NodeRecoveryStatus `json:"recoveries,omitempty"`

	// Rebalances lists managed RSPs that are currently shifted from baseline.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Rebalances []RebalanceStatus `json:"rebalances,omitempty"`

	// FailoverReadiness is the N+1 estimate of each managed RSP, as the
	// last rebalance pass over it made it: per member, the replicas the RSP
	// places there, the room counted for it, and how many replicas would
	// stay Pending if it failed now. Held RSPs are not listed; the
	// FailoverReady condition sums it up.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	FailoverReadiness []RSPReadiness `json:"failoverReadiness,omitempty"`

	// RecentDecisions is a bounded log of recent actions, newest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	RecentDecisions []Decision `json:"recentDecisions,omitempty"`
}

// RSPReadiness is the N+1 estimate of one managed RSP: what each member's
// failure now would leave Pending (docs/rebalance.md, Failover readiness).
type RSPReadiness struct {
	// Namespace and Name of the ReplicaSchedulingPreference.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// TotalReplicas is the user's totalReplicas: what the members left
	// after a failure must run.
	TotalReplicas int32 `json:"totalReplicas"`
	// Members lists each member the policy selects.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Members []MemberReadiness `json:"members,omitempty"`
}

// MemberReadiness is one member's part in an RSP's N+1 estimate.
type MemberReadiness struct {
	// Name of the KubeFedCluster.
	Name string `json:"name"`
	// Replicas is how many replicas the RSP places on the member now.
	Replicas int32 `json:"replicas"`
	// Room is how many of the workload's replicas the member can run (its
	// Running and Ready replicas plus what capacity.Fit says fits more,
	// within what the RSP lets kubefed give it), at most totalReplicas;
	// 0 when the member is failed, what it holds when it is unobserved.
	Room int32 `json:"room"`
	// Unobserved: fedfailover's own view says nothing about the member now
	// (its cache syncing, unreachable): its room is unknown.
	// +optional
	Unobserved bool `json:"unobserved,omitempty"`
	// Shortfall is how many of totalReplicas the other members have no
	// room for: they would stay Pending if this member failed now. Absent
	// when not known (another member is unobserved).
	// +optional
	Shortfall *int32 `json:"shortfall,omitempty"`
}

// MemberStatus summarises one member cluster.
type MemberStatus struct {
	// Name of the KubeFedCluster.
	Name string `json:"name"`
	// Connected is true while fedfailover holds a healthy connection.
	Connected bool `json:"connected"`
	// Reason is a CamelCase reason for the connection state.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains the connection state.
	// +optional
	Message string `json:"message,omitempty"`
	// LastProbeTime is when a probe found the member as this entry reports
	// it. Members are probed every few seconds, but status is not rewritten
	// only to move this time: it moves with the rest of the entry.
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	// ServerVersion is the member API server's version.
	// +optional
	ServerVersion string `json:"serverVersion,omitempty"`
	// NodesReady and NodesTotal count the member's nodes.
	// +optional
	NodesReady int32 `json:"nodesReady,omitempty"`
	// +optional
	NodesTotal int32 `json:"nodesTotal,omitempty"`
}

// RecoveryPhase is the stage of one node's recovery.
// +kubebuilder:validation:Enum=Lost;Remediating;Blocked;Fenced;Acting;Recovering;Recovered;Suspended;Finished
type RecoveryPhase string

// Recovery phases.
const (
	RecoveryPhaseLost    RecoveryPhase = "Lost"
	RecoveryPhaseBlocked RecoveryPhase = "Blocked"
	RecoveryPhaseFenced  RecoveryPhase = "Fenced"
	// RecoveryPhaseActing: the intent is recorded; the action is under way.
	RecoveryPhaseActing     RecoveryPhase = "Acting"
	RecoveryPhaseRecovering RecoveryPhase = "Recovering"
	RecoveryPhaseRecovered  RecoveryPhase = "Recovered"
	RecoveryPhaseSuspended  RecoveryPhase = "Suspended"
	// RecoveryPhaseRemediating: a remediation (fence agent) was requested
	// for the lost node, or another party's is waited for; nothing
	// destructive is done until it reports success or Machine evidence
	// appears.
	RecoveryPhaseRemediating RecoveryPhase = "Remediating"
	// RecoveryPhaseFinished: a NodeRecovery record that is closed.
	RecoveryPhaseFinished RecoveryPhase = "Finished"
)

// RecoveryPhases lists every phase of a recovery still going on (all but
// Finished), e.g. for metrics that keep a series per phase.
var RecoveryPhases = []RecoveryPhase{RecoveryPhaseLost, RecoveryPhaseRemediating, RecoveryPhaseBlocked, RecoveryPhaseFenced,
	RecoveryPhaseActing, RecoveryPhaseRecovering, RecoveryPhaseRecovered, RecoveryPhaseSuspended}

// NodeRecoveryStatus is the state of one lost node.
type NodeRecoveryStatus struct {
	// Cluster is the member cluster.
	Cluster string `json:"cluster"`
	// Node is the member Node name.
	Node string `json:"node"`
	// Machine is the Cluster API Machine (namespace/name), if any.
	// +optional
	Machine string `json:"machine,omitempty"`
	// Phase of the recovery.
	Phase RecoveryPhase `json:"phase"`
	// LostSince is when the node's Ready condition stopped being True.
	// +optional
	LostSince *metav1.Time `json:"lostSince,omitempty"`
	// Detection is how the node was found lost: Evidence (Machine evidence
	// and a kubelet Lease not renewed) or NotReady (its Ready condition for
	// notReadyFor).
	// +optional
	Detection NodeLossDetection `json:"detection,omitempty"`
	// FencedAt is when fencing evidence was first seen.
	// +optional
	FencedAt *metav1.Time `json:"fencedAt,omitempty"`
	// Evidence names the fencing evidence found.
	// +optional
	Evidence string `json:"evidence,omitempty"`
	// Method is the recovery method applied.
	// +optional
	Method RecoveryMethod `json:"method,omitempty"`
	// Remediation names the remediation object the recovery waits for or
	// waited for (Kind namespace/name), if any.
	// +optional
	Remediation string `json:"remediation,omitempty"`
	// AffectedPods counts in-scope pods that were on the node.
	// +optional
	AffectedPods int32 `json:"affectedPods,omitempty"`
	// Message explains the phase, e.g. which evidence is missing.
	// +optional
	Message string `json:"message,omitempty"`
}

// RebalanceStatus is the state of one managed RSP.
type RebalanceStatus struct {
	// Namespace and Name of the ReplicaSchedulingPreference.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Shifted is true while the RSP differs from its baseline.
	Shifted bool `json:"shifted"`
	// Reason for the current placement.
	// +optional
	Reason string `json:"reason,omitempty"`
	// LastChangeTime is when fedfailover last changed the RSP.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
}

// Decision records one action fedfailover took or, in dry-run, would take.
type Decision struct {
	// Time of the decision.
	Time metav1.Time `json:"time"`
	// Cluster the decision is about.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Object is Kind/namespace/name (or Kind/name) the decision acted on.
	Object string `json:"object"`
	// Action taken, e.g. TaintedOutOfService, ShiftedWeights.
	Action string `json:"action"`
	// Reason is a CamelCase reason.
	Reason string `json:"reason"`
	// Message explains the decision.
	// +optional
	Message string `json:"message,omitempty"`
	// DryRun is true when the action was only reported.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// FailoverPolicy keeps workloads on a kubefed federation alive when member
// nodes or whole members fail.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fop,categories=fedfailover
// +kubebuilder:printcolumn:name="Recovery",type=boolean,JSONPath=`.spec.nodeRecovery.enabled`
// +kubebuilder:printcolumn:name="Rebalance",type=boolean,JSONPath=`.spec.rebalance.enabled`
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.spec.dryRun`
// +kubebuilder:printcolumn:name="Connected",type=integer,JSONPath=`.status.connectedMembers`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Storm",type=string,JSONPath=`.status.conditions[?(@.type=="StormActive")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FailoverPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FailoverPolicySpec   `json:"spec,omitempty"`
	Status FailoverPolicyStatus `json:"status,omitempty"`
}

// FailoverPolicyList is a list of FailoverPolicy.
// +kubebuilder:object:root=true
type FailoverPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FailoverPolicy `json:"items"`
}

// On reports whether node recovery is configured and enabled. Enabled is a
// pointer so that a Go client leaving it out gets the default (true) and
// an explicit false is kept; a plain bool sent false for every job left out.
func (s *NodeRecoverySpec) On() bool { return s != nil && (s.Enabled == nil || *s.Enabled) }

// On reports whether rebalancing is configured and enabled (see
// NodeRecoverySpec.On).
func (s *RebalanceSpec) On() bool { return s != nil && (s.Enabled == nil || *s.Enabled) }
