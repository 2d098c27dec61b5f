package contract

import (
	"fmt"
	"strings"
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
