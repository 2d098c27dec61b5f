package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberMaintenanceSpec asks for a member to be emptied for planned
// maintenance (docs/rebalance.md, "Planned maintenance of a member").
type MemberMaintenanceSpec struct {
	// Member is the member to empty: the name of its KubeFedCluster. It
	// cannot change: end this maintenance (delete it) and create another.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.member is immutable: delete this MemberMaintenance and create another for the other member"
	Member string `json:"member"`
	// Force starts the drain even when the other members have no room for
	// all the member's replicas (the request is refused otherwise). It
	// never moves replicas faster than the others have room: what fits
	// nowhere else stays on the member, and Ready replicas never fall
	// below each RSP's totalReplicas.
	// +optional
	Force bool `json:"force,omitempty"`
	// Reason says why (for people and the CLI).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
}

// MemberMaintenanceStatus is the state of a maintenance request, written
// by fedfailover alone.
type MemberMaintenanceStatus struct {
	// ObservedGeneration is the generation the status is about.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Accepted (the drain is on, or refused and why) and
	// Drained (no managed RSP asks the member for a replica any more).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Moved is how many replicas left the member so far, of Share, its
	// share under the users' weights (summed over the managed RSPs).
	// +optional
	Moved int32 `json:"moved,omitempty"`
	// +optional
	Share int32 `json:"share,omitempty"`
	// Pending is how many replicas started on the other members for the
	// drain are not Ready yet: the member keeps as many until they are.
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// WaitingForRoom is how many of the member's replicas fit on no other
	// member now: they stay until room appears.
	// +optional
	WaitingForRoom int32 `json:"waitingForRoom,omitempty"`
	// Progress says it in words, e.g. "12 of 30 replicas moved, 3 not
	// Ready yet on member2, 3 waiting for room".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Progress string `json:"progress,omitempty"`
	// RSPs is the drain of each managed RSP that places replicas on the
	// member (at most 256).
	// +optional
	// +kubebuilder:validation:MaxItems=256
	RSPs []MaintenanceRSP `json:"rsps,omitempty"`
}

// MaintenanceRSP is the drain of one managed RSP.
type MaintenanceRSP struct {
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Left is what the RSP asks of the member now; Share its share under
	// the user's weights.
	Left  int32 `json:"left"`
	Share int32 `json:"share"`
	// +optional
	Pending int32 `json:"pending,omitempty"`
	// +optional
	WaitingForRoom int32 `json:"waitingForRoom,omitempty"`
}

// Condition types of a MemberMaintenance.
const (
	// ConditionAccepted is True while the member is being drained (or is
	// drained); False when the request is refused (its reason says why).
	// Once True for a generation it stays True: a drain is not stopped
	// half-way because the drain itself used the room it was accepted on.
	ConditionAccepted = "Accepted"
	// ConditionDrained is True once no managed RSP asks the member for a
	// replica (what fits nowhere else excepted, see waitingForRoom).
	ConditionDrained = "Drained"
)

// Reasons of the MemberMaintenance conditions.
const (
	// ReasonMaintenanceAccepted: Accepted; the others have room for the
	// member's replicas of every managed RSP (planner.FailoverReadiness).
	ReasonMaintenanceAccepted = "RoomElsewhere"
	// ReasonMaintenanceForced: Accepted; spec.force, whatever the room.
	ReasonMaintenanceForced = "Forced"
	// ReasonMaintenanceNoRoom: refused; the others lack room for some of
	// the member's replicas (the message names the RSPs and how many).
	ReasonMaintenanceNoRoom = "InsufficientRoom"
	// ReasonMaintenanceRoomUnknown: refused; some member's room is unknown
	// now, or a policy has not published its estimate yet.
	ReasonMaintenanceRoomUnknown = "RoomUnknown"
	// ReasonMaintenanceNoMember: refused; no KubeFedCluster has that name.
	ReasonMaintenanceNoMember = "MemberNotFound"
	// ReasonDraining: Drained False; replicas are still moving.
	ReasonDraining = "Draining"
	// ReasonWaitingForRoom: Drained False; only replicas that fit nowhere
	// else are left.
	ReasonWaitingForRoom = "WaitingForRoom"
	// ReasonMemberDrained: Drained True.
	ReasonMemberDrained = "MemberDrained"
	// ReasonNotAccepted: Drained False; the request is refused.
	ReasonNotAccepted = "NotAccepted"
)

// MemberMaintenance asks fedfailover to empty one member for planned
// maintenance: every managed ReplicaSchedulingPreference moves its
// replicas off it, make before break, as fast as the other members have
// room and their new replicas are Ready. Deleting it ends the maintenance:
// the replicas come back through the normal failback (stabilization
// window, steps). It lives on the host, cluster-scoped like the members
// it names, so one request covers every policy that selects the member.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mm,categories=fedfailover
// +kubebuilder:printcolumn:name="Member",type=string,JSONPath=`.spec.member`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Drained",type=string,JSONPath=`.status.conditions[?(@.type=="Drained")].status`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.progress`
// +kubebuilder:printcolumn:name="Force",type=boolean,JSONPath=`.spec.force`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberMaintenance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemberMaintenanceSpec   `json:"spec"`
	Status MemberMaintenanceStatus `json:"status,omitempty"`
}

// MemberMaintenanceList is a list of MemberMaintenance.
// +kubebuilder:object:root=true
type MemberMaintenanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberMaintenance `json:"items"`
}
