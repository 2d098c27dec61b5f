package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// The reports the commands print with -o json, yaml, jsonpath, go-template
// are typed objects with an apiVersion and a kind, so cli-runtime's
// printers take them as they take any Kubernetes object. They are in
// fedfailover's API group but no API server serves them (there is no CRD):
// they exist only in the plugin's output.
const (
	// KindStatusReport is `kubectl failover status`.
	KindStatusReport = "StatusReport"
	// KindNodeExplanation is `kubectl failover explain node`.
	KindNodeExplanation = "NodeExplanation"
	// KindPlanReport is `kubectl failover plan`.
	KindPlanReport = "PlanReport"
)

// ReportGroupVersion is the apiVersion of the reports.
var ReportGroupVersion = v1alpha1.GroupVersion

// Report is what a command prints: a typed object, and the host objects
// it shows, which -o name prints.
type Report interface {
	runtime.Object
	// Objects are the host objects the report has rows or sections for,
	// in its order, each with its kind and name.
	Objects() []runtime.Object
}

// StatusReport is the status view as an object: apiVersion, kind, then
// the view's fields (time, members, policies, ...).
type StatusReport struct {
	metav1.TypeMeta `json:",inline"`
	StatusView      `json:",inline"`
}

// NewStatusReport wraps a status view.
func NewStatusReport(v StatusView) *StatusReport {
	return &StatusReport{TypeMeta: typeMeta(KindStatusReport), StatusView: v}
}

// Objects: the KubeFedClusters of the members, the policies, the RSPs and
// the active NodeRecovery records, as the tables list them. A member only
// a policy's status knows of has no KubeFedCluster, and a recovery only a
// policy's status holds has no record: neither is listed.
func (r *StatusReport) Objects() []runtime.Object {
	var out []runtime.Object
	for _, m := range r.Members {
		if m.KubefedReady != kubefedMissing {
			out = append(out, ref(kubefedv1beta1.SchemeGroupVersion.WithKind("KubeFedCluster"), "", m.Name))
		}
	}
	for _, p := range r.Policies {
		out = append(out, ref(v1alpha1.GroupVersion.WithKind("FailoverPolicy"), "", p.Name))
	}
	for _, rsp := range r.RSPs {
		out = append(out, ref(fedschedv1a1.SchemeGroupVersion.WithKind("ReplicaSchedulingPreference"), rsp.Namespace, rsp.Name))
	}
	for _, rec := range r.Recoveries {
		if rec.Record != "" {
			out = append(out, ref(v1alpha1.GroupVersion.WithKind("NodeRecovery"), "", rec.Record))
		}
	}
	return out
}

// DeepCopyObject copies the report through JSON, the form every printer
// reads.
func (r *StatusReport) DeepCopyObject() runtime.Object { return copyThroughJSON(r) }

// untimed is the report without its time, which differs on every read:
// --watch prints a new document only when this changed.
func (r *StatusReport) untimed() Report {
	c := *r
	c.Time = time.Time{}
	return &c
}

// NodeExplanation is the explanation of a node as an object.
type NodeExplanation struct {
	metav1.TypeMeta `json:",inline"`
	Explanation     `json:",inline"`
}

// NewNodeExplanation wraps an explanation.
func NewNodeExplanation(e Explanation) *NodeExplanation {
	return &NodeExplanation{TypeMeta: typeMeta(KindNodeExplanation), Explanation: e}
}

// Objects: the policy that covers the member, the node's NodeRecovery
// records, the member's RecoveryGuard and the node's Machine, as far as
// they exist.
func (e *NodeExplanation) Objects() []runtime.Object {
	var out []runtime.Object
	if e.Policy != "" {
		out = append(out, ref(v1alpha1.GroupVersion.WithKind("FailoverPolicy"), "", e.Policy))
	}
	for _, rec := range e.Records {
		out = append(out, ref(v1alpha1.GroupVersion.WithKind("NodeRecovery"), "", rec.Name))
	}
	if e.Storm.Guard != "" {
		out = append(out, ref(v1alpha1.GroupVersion.WithKind("RecoveryGuard"), "", e.Storm.Guard))
	}
	if e.Machine != nil {
		ns, name := splitName(e.Machine.Name)
		out = append(out, ref(clusterv1.GroupVersion.WithKind("Machine"), ns, name))
	}
	return out
}

// DeepCopyObject copies the explanation through JSON, the form every
// printer reads.
func (e *NodeExplanation) DeepCopyObject() runtime.Object { return copyThroughJSON(e) }

// PlanReport is the what-if preview as an object.
type PlanReport struct {
	metav1.TypeMeta `json:",inline"`
	PlanView        `json:",inline"`
}

// NewPlanReport wraps a plan view.
func NewPlanReport(v PlanView) *PlanReport {
	return &PlanReport{TypeMeta: typeMeta(KindPlanReport), PlanView: v}
}

// Objects: the RSPs the plan covers (its rows, then the held ones); the
// unmanaged RSPs it only names are left out.
func (p *PlanReport) Objects() []runtime.Object {
	gvk := fedschedv1a1.SchemeGroupVersion.WithKind("ReplicaSchedulingPreference")
	var out []runtime.Object
	for _, r := range p.RSPs {
		out = append(out, ref(gvk, r.Namespace, r.Name))
	}
	for _, h := range p.Held {
		ns, name := splitName(h.RSP)
		out = append(out, ref(gvk, ns, name))
	}
	return out
}

// DeepCopyObject copies the plan through JSON, the form every printer
// reads.
func (p *PlanReport) DeepCopyObject() runtime.Object { return copyThroughJSON(p) }

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: ReportGroupVersion.String(), Kind: kind}
}

// ref names a host object for -o name.
func ref(gvk schema.GroupVersionKind, namespace, name string) runtime.Object {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	o.SetGroupVersionKind(gvk)
	return o
}

// splitName splits "namespace/name"; a name without a slash has no
// namespace.
func splitName(s string) (string, string) {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return ns, name
	}
	return "", s
}

func copyThroughJSON[T any](in *T) *T {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("copying %T: %v", in, err)) // plain data: cannot fail
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		panic(fmt.Sprintf("copying %T: %v", in, err))
	}
	return out
}
