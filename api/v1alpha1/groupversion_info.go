// Package v1alpha1 contains the FailoverPolicy API of fedfailover.
// +kubebuilder:object:generate=true
// +groupName=failover.fedfailover.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the fedfailover API.
	GroupVersion = schema.GroupVersion{Group: "failover.fedfailover.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API types with a runtime.Scheme. It only
	// needs apimachinery, so importing the API stays cheap.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &FailoverPolicy{}, &FailoverPolicyList{}, &NodeRecovery{}, &NodeRecoveryList{}, &RecoveryGuard{}, &RecoveryGuardList{},
		&RebalanceRecord{}, &RebalanceRecordList{},
		&MemberSummary{}, &MemberSummaryList{}, &MemberMaintenance{}, &MemberMaintenanceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
