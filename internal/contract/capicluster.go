package contract

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// CAPIClusterRef is the decoded AnnotationCAPICluster.
type CAPIClusterRef struct {
	// Namespace is empty for the bare-name form: the Cluster of that name
	// in whichever namespace holds one.
	Namespace string
	Name      string
}

// String is the annotation value: "namespace/name", or the bare name.
func (r CAPIClusterRef) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// DecodeCAPICluster reads AnnotationCAPICluster; set is false when it is
// absent or empty. A value with an empty namespace or name, or more than
// one "/", is an error.
func DecodeCAPICluster(annotations map[string]string) (ref CAPIClusterRef, set bool, err error) {
	v := annotations[AnnotationCAPICluster]
	if v == "" {
		return CAPIClusterRef{}, false, nil
	}
	ns, name, qualified := strings.Cut(v, "/")
	if !qualified {
		return CAPIClusterRef{Name: v}, true, nil
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return CAPIClusterRef{}, true, fmt.Errorf("annotation %s=%q: want namespace/name or a Cluster name", AnnotationCAPICluster, v)
	}
	return CAPIClusterRef{Namespace: ns, Name: name}, true, nil
}

// ManagementKubeconfigKeys are the Secret data keys a management cluster's
// kubeconfig is read from, the first present one: "kubeconfig", then
// "value" (the key of Cluster API's own <cluster>-kubeconfig Secrets).
var ManagementKubeconfigKeys = []string{"kubeconfig", "value"}

// DecodeCAPIManagementCluster reads AnnotationCAPIManagementCluster: the
// name of a Secret in the KubeFedCluster's namespace; set is false when it
// is absent or empty. A value that is not a Secret name is an error; one
// with a "/" too, since no reference to another namespace is followed.
func DecodeCAPIManagementCluster(annotations map[string]string) (secret string, set bool, err error) {
	v, ok := annotations[AnnotationCAPIManagementCluster]
	if !ok || v == "" {
		return "", false, nil
	}
	if strings.Contains(v, "/") {
		return "", true, fmt.Errorf("annotation %s=%q: want the name of a Secret in the KubeFedCluster's own namespace; references to another namespace are not followed",
			AnnotationCAPIManagementCluster, v)
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", true, fmt.Errorf("annotation %s=%q is not a Secret name: %s", AnnotationCAPIManagementCluster, v, strings.Join(errs, "; "))
	}
	return v, true, nil
}
