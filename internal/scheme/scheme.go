// Package scheme builds the runtime.Scheme shared by the manager, the CLI and
// the tests: client-go types, the fedfailover API, Cluster API v1beta2 and the
// kubefed types fedfailover reads and writes.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	kubefedschedv1alpha1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	failoverv1alpha1 "github.com/fedfailover/fedfailover/api/v1alpha1"
)

// New returns a scheme with every API group fedfailover uses.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for name, add := range map[string]func(*runtime.Scheme) error{
		"client-go":            clientgoscheme.AddToScheme,
		"fedfailover v1alpha1": failoverv1alpha1.AddToScheme,
		"cluster-api v1beta2":  clusterv1.AddToScheme,
		"kubefed core":         kubefedv1beta1.AddToScheme,
		"kubefed scheduling":   kubefedschedv1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("registering %s types: %w", name, err)
		}
	}
	return s, nil
}
