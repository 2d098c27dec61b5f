// Package cachedpod is what a member cache keeps of a Pod.
package cachedpod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Pod is a member Pod as the member caches hold it: only what fedfailover's
// decisions read, in a struct of 352 bytes where a corev1.Pod is 1,280
// whatever its fields hold (pods are most of a member cache: 55 MB of
// structs at 60,000 pods). It is a client.Object, so the member caches'
// event handlers and predicates receive it; the member caches'
// transform makes it (see controllers/member/transform.go for what is
// kept and why).
//
// Like everything in an informer cache it is read-only, and its slices
// and the Requests it points to are shared between pods.
type Pod struct {
	// TypeMeta and ObjectMeta are the Pod's (without managedFields and
	// annotations).
	metav1.TypeMeta
	metav1.ObjectMeta
	// NodeName is spec.nodeName.
	NodeName string
	// Phase is status.phase.
	Phase corev1.PodPhase
	// Volumes are the volumes backed by a claim: a PersistentVolumeClaim's
	// name, or an ephemeral volume (its claim is <pod>-<volume>).
	Volumes []corev1.Volume
	// Requests are the pod's effective requests (capacity.PodRequests of
	// its spec): what it takes on its node.
	Requests *corev1.ResourceRequirements
	// Conditions are the Ready and PodScheduled conditions, with their
	// type, status and reason (not their times).
	Conditions []corev1.PodCondition
}

// Condition is the pod's condition of type t, or nil.
func (p *Pod) Condition(t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Conditions {
		if p.Conditions[i].Type == t {
			return &p.Conditions[i]
		}
	}
	return nil
}

// RequestList is what the pod takes on its node (nil when nothing).
func (p *Pod) RequestList() corev1.ResourceList {
	if p.Requests == nil {
		return nil
	}
	return p.Requests.Requests
}

// DeepCopyObject copies the pod and everything it refers to.
func (p *Pod) DeepCopyObject() runtime.Object {
	if p == nil {
		return nil
	}
	out := &Pod{TypeMeta: p.TypeMeta, NodeName: p.NodeName, Phase: p.Phase}
	meta := &p.ObjectMeta
	meta.DeepCopyInto(&out.ObjectMeta)
	if p.Volumes != nil {
		out.Volumes = make([]corev1.Volume, len(p.Volumes))
		for i := range p.Volumes {
			p.Volumes[i].DeepCopyInto(&out.Volumes[i])
		}
	}
	if p.Requests != nil {
		out.Requests = p.Requests.DeepCopy()
	}
	if p.Conditions != nil {
		out.Conditions = make([]corev1.PodCondition, len(p.Conditions))
		for i := range p.Conditions {
			p.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
	return out
}
