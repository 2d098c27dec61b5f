package member

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// The member caches keep only what fedfailover's decisions read. The cached
// objects are therefore partial: never Update one (that would write the
// stripped fields back empty); Patch, or read the full object with the
// uncached client.

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimMeta drops managedFields and the last-applied annotation (a full copy
// of the object).
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	// The informer owns the freshly decoded object: editing in place is safe.
	delete(m.Annotations, lastApplied)
}

// transformPod keeps metadata (without annotations), node, PVC volumes,
// tolerations, nodeSelector, resource requests, phase and the two conditions
// decisions read (Ready, PodScheduled). Pods are most of a member's cache, so
// every field kept here costs memory per pod.
func transformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones pass through
	}
	p.ManagedFields = nil
	p.Annotations = nil
	out := &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: p.ObjectMeta,
		Spec: corev1.PodSpec{
			NodeName:          p.Spec.NodeName,
			NodeSelector:      p.Spec.NodeSelector,
			Tolerations:       p.Spec.Tolerations,
			Overhead:          p.Spec.Overhead,
			Priority:          p.Spec.Priority,
			SchedulerName:     p.Spec.SchedulerName,
			Containers:        requestsOnly(p.Spec.Containers),
			InitContainers:    requestsOnly(p.Spec.InitContainers),
			Resources:         requestsOfPod(p.Spec.Resources),
			RestartPolicy:     p.Spec.RestartPolicy,
			PriorityClassName: p.Spec.PriorityClassName,
		},
		Status: corev1.PodStatus{
			Phase:      p.Status.Phase,
			Conditions: decisionConditions(p.Status.Conditions),
			Reason:     p.Status.Reason,
		},
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName},
			}})
		case v.Ephemeral != nil:
			// The claim is named <pod>-<volume>; the template is not needed.
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Ephemeral: &corev1.EphemeralVolumeSource{},
			}})
		}
	}
	return out, nil
}

// decisionConditions keeps Ready and PodScheduled without their messages.
func decisionConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range cs {
		if c.Type == corev1.PodReady || c.Type == corev1.PodScheduled {
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
}

func requestsOnly(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		// RestartPolicy marks sidecar init containers, whose requests add up.
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy,
			Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}}
	}
	return out
}

func requestsOfPod(r *corev1.ResourceRequirements) *corev1.ResourceRequirements {
	if r == nil {
		return nil
	}
	return &corev1.ResourceRequirements{Requests: r.Requests}
}

// transformNode drops the image list (the bulk of a Node) and managed fields.
func transformNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	trimMeta(&n.ObjectMeta)
	n.Status.Images = nil
	n.Status.DaemonEndpoints = corev1.NodeDaemonEndpoints{}
	n.Status.Config = nil
	n.Status.Features = nil
	n.Status.RuntimeHandlers = nil
	return n, nil
}

// transformVolumeAttachment drops the attach metadata and inline volume spec.
func transformVolumeAttachment(obj any) (any, error) {
	va, ok := obj.(*storagev1.VolumeAttachment)
	if !ok {
		return obj, nil
	}
	trimMeta(&va.ObjectMeta)
	va.Spec.Source.InlineVolumeSpec = nil
	va.Status.AttachmentMetadata = nil
	return va, nil
}

// transformMeta only trims metadata (CSIDrivers are small).
func transformMeta(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		delete(o.GetAnnotations(), lastApplied)
	}
	return obj, nil
}

var (
	_ toolscache.TransformFunc = transformPod
	_ toolscache.TransformFunc = transformNode
	_ toolscache.TransformFunc = transformVolumeAttachment
	_ toolscache.TransformFunc = transformMeta
)
