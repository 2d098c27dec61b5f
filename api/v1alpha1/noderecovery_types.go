package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeRecoveryRecordSpec identifies the node and the loss a NodeRecovery is
// about. It is set when the record is created and never changes: a Node
// re-created under the same name, or a new loss of the same node, gets a
// new record.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type NodeRecoveryRecordSpec struct {
	// Cluster is the member cluster (its KubeFedCluster name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// Node is the member Node name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// NodeUID is the UID of the Node this record is about.
	// +kubebuilder:validation:MaxLength=128
	NodeUID string `json:"nodeUID"`
	// ProviderID is the Node's spec.providerID when the loss was seen.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`
	// Machine is the Cluster API Machine of the node when the loss was seen.
	// +optional
	Machine *MachineReference `json:"machine,omitempty"`
	// Policy is the FailoverPolicy that governed the member's node recovery
	// when the loss was seen.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy,omitempty"`
	// LostSince is the Node's Ready lastTransitionTime when the loss was
	// first seen, as the member reported it (the member's clock: shown, never
	// compared with the host's clock).
	// +optional
	LostSince *metav1.Time `json:"lostSince,omitempty"`
}

// MachineReference names a Cluster API Machine in the host cluster.
type MachineReference struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// +optional
	UID string `json:"uid,omitempty"`
}

// NodeRecoveryRecordStatus is what fedfailover decided and did, in order:
// the intent (method, evidence, whether an out-of-service taint was already
// there) is written before any destructive write, the result after it. A
// restart resumes from it, but nothing here authorizes a destructive write:
// each one needs a fencing verdict computed from live reads in the same pass.
type NodeRecoveryRecordStatus struct {
	// Phase of the recovery.
	// +optional
	Phase RecoveryPhase `json:"phase,omitempty"`
	// Message explains the phase, e.g. which evidence is missing.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// ObservedAt is when fedfailover first saw this loss (the host's clock).
	// notReadyFor is measured from it.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
	// ReadyStatus and ReadySince are the Node's Ready condition (status and
	// lastTransitionTime, the member's clock) as last seen during this loss.
	// They are compared only with later Ready conditions of the same Node,
	// for equality: a False to Unknown flip (the kubelet stopped) continues
	// the loss; any other new transition means the node ran again in between.
	// +optional
	ReadyStatus string `json:"readyStatus,omitempty"`
	// +optional
	ReadySince *metav1.Time `json:"readySince,omitempty"`
	// ReadyObservedAt is when fedfailover first saw that Ready condition (the
	// host's clock). assumeFencedAfter is measured from it.
	// +optional
	ReadyObservedAt *metav1.Time `json:"readyObservedAt,omitempty"`
	// Detection is how fedfailover found the node lost: Evidence (positive
	// fencing evidence and the kubelet's Lease not renewed across its own
	// readings) or NotReady (the Ready condition for notReadyFor). Shown,
	// never an authority: every destructive write needs a verdict from live
	// reads.
	// +optional
	Detection NodeLossDetection `json:"detection,omitempty"`
	// DetectedBy says what made the node lost, e.g. "lost by evidence:
	// Machine infrastructure deleted, kubelet Lease not renewed for 14s as
	// seen by fedfailover".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	DetectedBy string `json:"detectedBy,omitempty"`
	// Evidence names the fencing evidence of the action.
	// +optional
	Evidence string `json:"evidence,omitempty"`
	// Method is the recovery method chosen.
	// +optional
	Method RecoveryMethod `json:"method,omitempty"`
	// TaintPreexisting is true when the node already had an out-of-service
	// taint before fedfailover acted, or when fedfailover's own patch was not
	// what added it (another remediator's taint may appear between the
	// intent and the patch): that taint is never removed by it.
	// +optional
	TaintPreexisting bool `json:"taintPreexisting,omitempty"`
	// LostTaint is what fedfailover decided, with the intent, about its own
	// NoSchedule taint (failover.fedfailover.io/lost, its value this
	// record's UID) on a node whose pods it force-deletes while the node
	// still reports Ready (method ForceDelete, node lost by evidence), so
	// that the member's scheduler binds no replacement back onto it: Owned,
	// fedfailover adds it before the first deletion and removes it, and only
	// that exact taint, when the node returns; Preexisting, a taint with
	// that key and effect was on the Node, read live, before: fedfailover
	// neither adds nor removes it. Empty: no such taint was decided.
	// +optional
	LostTaint LostTaintOwnership `json:"lostTaint,omitempty"`
	// Claims lists the namespace/claim of the in-scope pods on the node when
	// it was fenced: the replacements tracked.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Claims []string `json:"claims,omitempty"`
	// IntentAt is when the intent was recorded, before the action.
	// +optional
	IntentAt *metav1.Time `json:"intentAt,omitempty"`
	// ActedAt is when the action (taint or first force deletion) was done.
	// +optional
	ActedAt *metav1.Time `json:"actedAt,omitempty"`
	// RecoveredAt is when every tracked claim ran elsewhere again.
	// +optional
	RecoveredAt *metav1.Time `json:"recoveredAt,omitempty"`
	// FinishedAt is when the record was closed; finished records are kept
	// for the retention period.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// FinishReason says why the record was closed.
	// +optional
	FinishReason string `json:"finishReason,omitempty"`
	// DryRun is true when the policy was in dry run: the action was only
	// decided and reported.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// Remediation is the remediation object (fence agent) requested for
	// this loss, or another party's that fedfailover waits for instead of
	// requesting its own: at most one per loss. Shown, and read back only to
	// never request a second one and to bound the wait: whether it succeeded
	// is read from the object itself, live, before every destructive write.
	// +optional
	Remediation *RemediationRecord `json:"remediation,omitempty"`
	// Migrated is true for a record made from the node annotations of an
	// older fedfailover. Such a record never makes fedfailover remove a
	// taint: whether the taint was ours cannot be proven.
	// +optional
	Migrated bool `json:"migrated,omitempty"`
}

// RemediationRecord is what fedfailover requested of (or found with) a
// remediator for one loss.
type RemediationRecord struct {
	// APIVersion and Kind of the remediation object.
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace and Name of the remediation object.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID of the remediation object: a later object under the same name is
	// another remediation.
	// +optional
	UID string `json:"uid,omitempty"`
	// Foreign is true when another party created the object for this node:
	// fedfailover waits for it and never deletes it.
	// +optional
	Foreign bool `json:"foreign,omitempty"`
	// RequestedAt is when fedfailover created the object or first found the
	// foreign one (fedfailover's clock): the timeout counts from it.
	RequestedAt metav1.Time `json:"requestedAt"`
	// Result is empty while waiting; Succeeded, Failed or TimedOut once over.
	// Failed and TimedOut are final for this loss: no other remediation is
	// requested, and the recovery stays Blocked unless Machine evidence
	// appears.
	// +optional
	// +kubebuilder:validation:Enum=Succeeded;Failed;TimedOut
	Result RemediationResult `json:"result,omitempty"`
	// Message says what the remediator reported.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// FinishedAt is when the result was seen (fedfailover's clock).
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// RemediationResult is how a remediation ended.
type RemediationResult string

// Remediation results.
const (
	RemediationSucceeded RemediationResult = "Succeeded"
	RemediationFailed    RemediationResult = "Failed"
	RemediationTimedOut  RemediationResult = "TimedOut"
)

// NodeRecovery is fedfailover's record of one loss of one member node: what
// it saw, the evidence, the action and its result. Only fedfailover writes
// it; it lives on the host, where member-level writers cannot forge it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nrec,categories=fedfailover
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.node`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Method",type=string,JSONPath=`.status.method`
// +kubebuilder:printcolumn:name="Evidence",type=string,JSONPath=`.status.evidence`
// +kubebuilder:printcolumn:name="Detection",type=string,JSONPath=`.status.detection`,priority=1
// +kubebuilder:printcolumn:name="Remediation",type=string,JSONPath=`.status.remediation.name`,priority=1
// +kubebuilder:printcolumn:name="Acted",type=date,JSONPath=`.status.actedAt`
// +kubebuilder:printcolumn:name="Recovered",type=date,JSONPath=`.status.recoveredAt`
// +kubebuilder:printcolumn:name="DryRun",type=boolean,JSONPath=`.status.dryRun`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeRecovery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeRecoveryRecordSpec   `json:"spec"`
	Status NodeRecoveryRecordStatus `json:"status,omitempty"`
}

// NodeRecoveryList is a list of NodeRecovery.
// +kubebuilder:object:root=true
type NodeRecoveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeRecovery `json:"items"`
}

// LostTaintOwnership says whether fedfailover's NoSchedule taint on a node
// force-deleted while it reports Ready is fedfailover's to remove.
// +kubebuilder:validation:Enum=Owned;Preexisting
type LostTaintOwnership string

// Ownerships of the lost taint.
const (
	// LostTaintOwned: fedfailover adds the taint and removes it.
	LostTaintOwned LostTaintOwnership = "Owned"
	// LostTaintPreexisting: a taint with the key and effect was there
	// before fedfailover acted; it is never removed by fedfailover.
	LostTaintPreexisting LostTaintOwnership = "Preexisting"
)

// Finish reasons of a NodeRecovery.
const (
	// FinishNodeReturned: the node is Ready again (and fedfailover's taint,
	// if any, is removed).
	FinishNodeReturned = "NodeReturned"
	// FinishNodeDeleted: the Node object is gone and the recovery is over.
	FinishNodeDeleted = "NodeDeleted"
	// FinishNodeReplaced: a Node with the same name but another UID exists.
	FinishNodeReplaced = "NodeReplaced"
	// FinishNoPolicy: no policy recovers the node any more (deleted,
	// disabled, or it no longer selects the member or the node), and
	// nothing had been done.
	FinishNoPolicy = "NoPolicy"
	// FinishKubeletBack: the node's Ready condition changed in a way only a
	// running kubelet causes: the node ran again since the loss was seen.
	FinishKubeletBack = "KubeletBack"
)
