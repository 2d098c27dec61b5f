package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberSummarySpec is what the manager replica that holds a member (with
// members sharded across replicas) saw of it, for the one replica that
// writes RSPs: per ReplicaSchedulingPreference, the observation a
// rebalance pass takes of a member it holds. Written only on change.
type MemberSummarySpec struct {
	// Member is the KubeFedCluster's name.
	// +kubebuilder:validation:MaxLength=253
	Member string `json:"member"`
	// Holder is the shard identity of the replica that wrote it. The
	// summary counts only while that replica holds the member's Lease, as
	// the reader sees the Lease (its own clock).
	// +kubebuilder:validation:MaxLength=253
	Holder string `json:"holder"`
	// Workloads are the RSPs' workloads as seen in the member, sorted by
	// namespace and name.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=20000
	Workloads []WorkloadSummary `json:"workloads,omitempty"`
}

// WorkloadSummary is one RSP's workload in one member.
type WorkloadSummary struct {
	// Namespace and Name are the ReplicaSchedulingPreference's.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Unknown: the holder's own view proves nothing yet (cache syncing).
	// +optional
	Unknown bool `json:"unknown,omitempty"`
	// Healthy: the holder reads the member and the workload.
	// +optional
	Healthy bool `json:"healthy,omitempty"`
	// Running counts the workload's Running, Ready, non-terminating pods.
	// +optional
	Running int64 `json:"running,omitempty"`
	// Placed counts the workload's replicas bound to a node and not
	// finished, of every revision, terminating ones included. A summary
	// without it (written by an older version) makes no prediction.
	// +optional
	Placed *int64 `json:"placed,omitempty"`
	// Fits is how many more replicas fit on the member's nodes.
	// +optional
	Fits int64 `json:"fits,omitempty"`
	// Unschedulable: a replica of the workload is Unschedulable there.
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`
	// Assigned is the member workload's spec.replicas (-1: none), and
	// AssignedObserved whether its controller has seen them.
	// +optional
	Assigned int64 `json:"assigned,omitempty"`
	// +optional
	AssignedObserved bool `json:"assignedObserved,omitempty"`
}

// MemberSummary is a member as the replica holding it sees it, published
// for the replica that writes RSPs (sharded managers only). Only
// fedfailover writes it; it is deleted when the member leaves.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=msum,categories=fedfailover
// +kubebuilder:printcolumn:name="Member",type=string,JSONPath=`.spec.member`
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.spec.holder`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberSummary struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec MemberSummarySpec `json:"spec"`
}

// MemberSummaryList is a list of MemberSummary.
// +kubebuilder:object:root=true
type MemberSummaryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberSummary `json:"items"`
}
