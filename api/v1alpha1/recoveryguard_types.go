package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RecoveryGuardStatus is the storm guard's state for one member.
type RecoveryGuardStatus struct {
	// StormActive is true from the start of a storm (more nodes lost at once
	// than maxUnhealthy allows) until its cooldown passed.
	// +optional
	StormActive bool `json:"stormActive,omitempty"`
	// StormEndedAt is when the lost nodes came back within maxUnhealthy (the
	// host's clock); unset while the storm lasts.
	// +optional
	StormEndedAt *metav1.Time `json:"stormEndedAt,omitempty"`
	// Message describes the storm.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RecoveryGuard keeps, for one member (same name as its KubeFedCluster),
// the node recovery state that is member-wide: the storm guard. fedfailover
// writes it on the host, so a restart neither forgets a storm nor its
// cooldown, and it needs no write access to KubeFedClusters.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=fedfailover
// +kubebuilder:printcolumn:name="Storm",type=boolean,JSONPath=`.status.stormActive`
// +kubebuilder:printcolumn:name="Ended",type=date,JSONPath=`.status.stormEndedAt`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type RecoveryGuard struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status RecoveryGuardStatus `json:"status,omitempty"`
}

// RecoveryGuardList is a list of RecoveryGuard.
// +kubebuilder:object:root=true
type RecoveryGuardList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RecoveryGuard `json:"items"`
}
