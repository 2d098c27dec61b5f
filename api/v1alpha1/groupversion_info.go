// Package v1alpha1 contains the FailoverPolicy API of fedfailover.
// +kubebuilder:object:generate=true
// +groupName=failover.fedfailover.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the fedfailover API.
	GroupVersion = schema.GroupVersion{Group: "failover.fedfailover.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
