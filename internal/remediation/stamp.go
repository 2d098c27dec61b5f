package remediation

import (
	"fmt"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// Target is the node a remediation is about.
type Target struct {
	Cluster, Node, NodeUID, ProviderID string
	// Machine is the node's Cluster API Machine (namespace/name), if the
	// host holds it.
	Machine string
}

// Stamp makes the remediation object named name from its template, as
// NodeHealthCheck and Cluster API do: the template's kind without the
// Template suffix, in the template's group/version and namespace, with
// spec.template.spec as its spec and spec.template.metadata's labels and
// annotations, plus fedfailover's own naming the member and node (they
// win over the template's), and owner, the loss's record, as controller.
func Stamp(tmpl *unstructured.Unstructured, name string, t Target, owner metav1.OwnerReference) (*unstructured.Unstructured, error) {
	kind, ok := strings.CutSuffix(tmpl.GetKind(), "Template")
	if !ok || kind == "" {
		return nil, fmt.Errorf("%s %s/%s is not a remediation template: its kind does not end in Template", tmpl.GetKind(), tmpl.GetNamespace(), tmpl.GetName())
	}
	body, found, err := unstructured.NestedMap(tmpl.Object, "spec", "template")
	if err != nil || !found {
		return nil, fmt.Errorf("%s %s/%s has no spec.template object to stamp", tmpl.GetKind(), tmpl.GetNamespace(), tmpl.GetName())
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetAPIVersion(tmpl.GetAPIVersion())
	u.SetKind(kind)
	u.SetNamespace(tmpl.GetNamespace())
	u.SetName(name)
	if spec, ok := body["spec"].(map[string]any); ok {
		u.Object["spec"] = spec
	} else {
		u.Object["spec"] = map[string]any{}
	}
	labels, annotations := map[string]string{}, map[string]string{}
	if md, ok := body["metadata"].(map[string]any); ok {
		copyStrings(labels, md["labels"])
		copyStrings(annotations, md["annotations"])
	}
	maps.Copy(annotations, map[string]string{
		contract.AnnotationRemediationCluster: t.Cluster,
		contract.AnnotationRemediationNode:    t.Node,
		contract.AnnotationRemediationNodeUID: t.NodeUID,
	})
	if t.ProviderID != "" {
		annotations[contract.AnnotationRemediationProviderID] = t.ProviderID
	}
	if t.Machine != "" {
		annotations[contract.AnnotationRemediationMachine] = t.Machine
	}
	labels[contract.LabelManagedBy] = contract.ManagedByValue
	for k, v := range map[string]string{contract.LabelRemediationCluster: t.Cluster, contract.LabelRemediationNode: t.Node} {
		if len(validation.IsValidLabelValue(v)) == 0 {
			labels[k] = v
		}
	}
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	owner.Controller = ptrTrue()
	u.SetOwnerReferences([]metav1.OwnerReference{owner})
	return u, nil
}

// AboutNode: the object's annotations name this member and node (as
// Stamp writes them): it is unambiguously about this node.
func AboutNode(u *unstructured.Unstructured, cluster, node string) bool {
	a := u.GetAnnotations()
	return a[contract.AnnotationRemediationCluster] == cluster && a[contract.AnnotationRemediationNode] == node
}

func copyStrings(dst map[string]string, src any) {
	m, ok := src.(map[string]any)
	if !ok {
		return
	}
	for k, v := range m {
		if s, ok := v.(string); ok {
			dst[k] = s
		}
	}
}

func ptrTrue() *bool { b := true; return &b }
