package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RebalanceRecordSpec is fedfailover's state of one managed
// ReplicaSchedulingPreference: the user's baseline, what fedfailover last
// wrote to the RSP and when, and its per-member timers. Only fedfailover
// writes it.
type RebalanceRecordSpec struct {
	// RSPUID is the UID of the ReplicaSchedulingPreference (same namespace
	// and name as the record) this record is about. An RSP deleted and
	// created again under the same name is another object.
	// +kubebuilder:validation:MaxLength=128
	RSPUID string `json:"rspUID"`
	// Policy is the FailoverPolicy that manages the RSP; empty once released.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy,omitempty"`
	// Baseline is the user's placement: what failback returns to and what a
	// release restores.
	Baseline RebalancePlacement `json:"baseline"`
	// Applied is the placement fedfailover last wrote (or found, on first
	// touch); a live spec differing from it was edited by someone else.
	// +optional
	Applied *RebalancePlacement `json:"applied,omitempty"`
	// LastChange is when fedfailover last changed the RSP (the host's
	// clock); minInterval counts from it. Never later than the time it is
	// read back: a later one is taken as that time.
	// +optional
	LastChange *metav1.Time `json:"lastChange,omitempty"`
	// Members are the per-member timers. The onsets (failingSince,
	// unschedulableSince, roomSince) are recorded for people and the CLI
	// only: every wait counts from the process's own first sighting.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Members map[string]RebalanceMemberTimers `json:"members,omitempty"`
	// Released is true once no policy manages the RSP any more and its
	// baseline (or the user's later edit) was given back: the spec carries
	// no pin of fedfailover's.
	// +optional
	Released bool `json:"released,omitempty"`
	// Release is set while the RSP is being given back: no policy manages
	// it any more, and its baseline is restored only where kubefed alone
	// would put replicas now, stepwise. Released (and this field cleared)
	// once the RSP is the baseline; cleared as well when a policy takes
	// the RSP over again.
	// +optional
	Release *RebalanceRelease `json:"release,omitempty"`
	// Migrated is true for a record seeded from the RSP's
	// failover.fedfailover.io/rebalance annotation of an older fedfailover.
	// +optional
	Migrated bool `json:"migrated,omitempty"`
}

// RebalanceRelease is a release in progress. It carries what the release
// needs once the policy that started it is gone.
type RebalanceRelease struct {
	// Since is when the release started (the host's clock).
	Since metav1.Time `json:"since"`
	// MaxStep is the most replicas moved back per step: the releasing
	// policy's failback.maxStep.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxStep int32 `json:"maxStep"`
	// Steps counts the steps written so far.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Steps int32 `json:"steps,omitempty"`
	// Waiting says what the release waits for now (for people and the
	// CLI).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Waiting string `json:"waiting,omitempty"`
}

// RebalancePlacement is the part of an RSP spec fedfailover writes.
type RebalancePlacement struct {
	// +kubebuilder:validation:Minimum=0
	TotalReplicas int32 `json:"totalReplicas"`
	// Clusters are the RSP's spec.clusters preferences.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	Clusters map[string]RebalanceClusterPreferences `json:"clusters,omitempty"`
}

// RebalanceClusterPreferences mirrors kubefed's ClusterPreferences.
type RebalanceClusterPreferences struct {
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinReplicas int64 `json:"minReplicas,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxReplicas *int64 `json:"maxReplicas,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Weight int64 `json:"weight,omitempty"`
}

// RebalanceMemberTimers are one member's timers (the host's clock).
type RebalanceMemberTimers struct {
	// +optional
	FailingSince *metav1.Time `json:"failingSince,omitempty"`
	// +optional
	UnschedulableSince *metav1.MicroTime `json:"unschedulableSince,omitempty"`
	// +optional
	RoomSince *metav1.Time `json:"roomSince,omitempty"`
	// LastFailback is when replicas were last moved back to the member; set
	// while it is on probation after that failback.
	// +optional
	LastFailback *metav1.Time `json:"lastFailback,omitempty"`
	// Backoff is the failback backoff level: the member's next failback
	// waits the stabilization window doubled that many times (at most 1h).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=8
	Backoff int32 `json:"backoff,omitempty"`
}

// RebalanceRecord is fedfailover's record of one ReplicaSchedulingPreference
// it manages (same namespace and name as the RSP). It lives on the host,
// written by fedfailover alone: the RSP itself can be rewritten, replaced
// or restored by anyone who can write it, and carries none of this state.
// It has no owner reference (see docs/rebalance.md): it outlives neither
// the RSP (fedfailover deletes it when the RSP is gone) nor is it
// collected while the RSP is shifted.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=rbrec,categories=fedfailover
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.spec.baseline.totalReplicas`
// +kubebuilder:printcolumn:name="Changed",type=date,JSONPath=`.spec.lastChange`
// +kubebuilder:printcolumn:name="Released",type=boolean,JSONPath=`.spec.released`
// +kubebuilder:printcolumn:name="Releasing",type=string,JSONPath=`.spec.release.waiting`,priority=1
// +kubebuilder:printcolumn:name="Migrated",type=boolean,JSONPath=`.spec.migrated`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RebalanceRecord struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec RebalanceRecordSpec `json:"spec"`
}

// RebalanceRecordList is a list of RebalanceRecord.
// +kubebuilder:object:root=true
type RebalanceRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RebalanceRecord `json:"items"`
}
