package member

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/capacity"
)

// The member caches keep only what fedfailover's decisions read. The cached
// objects are therefore partial: never Update one (that would write the
// stripped fields back empty); Patch, or read the full object with the
// uncached client.
//
// Cached objects also share values with each other (sharedValues, in
// intern.go):
// like everything in an informer cache they are read-only. Readers that
// list with UnsafeDisableDeepCopy or visit with VisitCached, and event
// handlers, must never modify them.

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimMeta drops managedFields and the last-applied annotation (a full copy
// of the object).
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	// The informer owns the freshly decoded object: editing in place is safe.
	delete(m.Annotations, lastApplied)
}

// transformPod keeps what the decisions read of a Pod, as a cachedpod.Pod:
//
//   - name, namespace, uid (force-delete precondition), resourceVersion,
//     labels (workload and pod-scope selectors), ownerReferences (DaemonSet
//     pods are not force-deleted), deletionTimestamp and finalizers (a
//     deleting pod a foreign finalizer holds is deleted once, then waited
//     for, and the recovery goes on to its volume attachments);
//   - spec.nodeName, the PVC and ephemeral volumes (claim tracking, without
//     the claim template: an ephemeral claim is named <pod>-<volume>);
//   - the pod's effective requests (capacity.PodRequests: containers, init
//     containers, pod-level requests and overhead), summed once here;
//   - status.phase and the Ready and PodScheduled conditions (type, status,
//     reason; not their times: rebalance reads only whether a pod is
//     Unschedulable, never since when, as that time is on the member's
//     clock).
//
// Nothing else is read (annotations, tolerations, nodeSelector, priority,
// containers' images, limits and statuses, IPs, messages, condition
// times ...). Pods are most of a member's cache, so every byte kept here is
// paid per pod: the values many pods repeat are shared rather than copied,
// and the decoded corev1.Pod (a 1,280-byte struct whatever it holds) is
// dropped for a 352-byte cachedpod.Pod.
func transformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones pass through
	}
	return CompactPod(p), nil
}

// CompactPod is what a member cache keeps of p (also for readers that are no
// member cache, the fakes of unit tests, so that they see what production
// sees).
func CompactPod(p *corev1.Pod) *cachedpod.Pod {
	return &cachedpod.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: shared.str(p.APIVersion), Kind: shared.str(p.Kind)},
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         shared.str(p.Namespace),
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Generation:        p.Generation,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
			Finalizers:        shared.strList(p.Finalizers),
			Labels:            shared.labels(p.Labels, p.Name),
			OwnerReferences:   shared.owners(p.OwnerReferences),
		},
		NodeName:   shared.str(p.Spec.NodeName),
		Phase:      corev1.PodPhase(shared.str(string(p.Status.Phase))),
		Volumes:    claimVolumes(p.Spec.Volumes),
		Requests:   shared.requests(capacity.PodRequests(&p.Spec)),
		Conditions: decisionConditions(p.Status.Conditions),
	}
}

// claimVolumes keeps the volumes backed by a claim, with only what names
// the claim, shared between pods with the same ones (a Deployment's shared
// claim, ephemeral volumes).
func claimVolumes(vs []corev1.Volume) []corev1.Volume {
	n := 0
	for i := range vs {
		if vs[i].PersistentVolumeClaim != nil || vs[i].Ephemeral != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]corev1.Volume, 0, n)
	for i := range vs {
		v := &vs[i]
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName},
			}})
		case v.Ephemeral != nil:
			// The claim is named <pod>-<volume>; the template is not needed.
			out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Ephemeral: &corev1.EphemeralVolumeSource{},
			}})
		}
	}
	return shared.volumes(out)
}

// decisionConditions keeps the type, status and reason of Ready and
// PodScheduled, shared between pods with the same ones (nearly every pod
// is Ready and scheduled).
func decisionConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	keep := func(c *corev1.PodCondition) bool { return c.Type == corev1.PodReady || c.Type == corev1.PodScheduled }
	n := 0
	for i := range cs {
		if keep(&cs[i]) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]corev1.PodCondition, 0, n)
	for i := range cs {
		if c := &cs[i]; keep(c) {
			out = append(out, corev1.PodCondition{Type: c.Type, Status: c.Status, Reason: c.Reason})
		}
	}
	return shared.conditions(out)
}

// transformNode keeps what the decisions read of a Node: name, uid (events),
// resourceVersion (optimistic-lock patches), labels (node selection),
// annotations (recovery marks, external fence marks), deletionTimestamp,
// spec.taints (whole: patches replace the list) and spec.unschedulable,
// status.allocatable, the Ready condition (status, reason,
// lastTransitionTime: how long a node has been lost; lastHeartbeatTime),
// and of metadata.managedFields only the newest time, as one entry: with
// the Ready times, the member's newest record of the Node, which bounds an
// external fence mark read from the Node (fencing.NewestMemberTime).
// Images, capacity, addresses, nodeInfo, the other conditions and the
// managed field sets are dropped.
func transformNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: shared.str(n.APIVersion), Kind: shared.str(n.Kind)},
		ObjectMeta: metav1.ObjectMeta{
			Name:              n.Name,
			UID:               n.UID,
			ResourceVersion:   n.ResourceVersion,
			Generation:        n.Generation,
			CreationTimestamp: n.CreationTimestamp,
			DeletionTimestamp: n.DeletionTimestamp,
			// Node labels are unique (hostname), so only their strings are
			// shared; annotation values are mostly unique, so only the keys.
			Labels:        shared.strMap(n.Labels, n.Name, true),
			Annotations:   shared.strMap(withoutLastApplied(n.Annotations), n.Name, false),
			ManagedFields: newestManagedTime(n.ManagedFields),
		},
		// providerID ties the Node to its Machine: node recovery compares them.
		Spec: corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable, ProviderID: n.Spec.ProviderID},
		Status: corev1.NodeStatus{
			Allocatable: shared.list(n.Status.Allocatable),
		},
	}
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady,
				Status: corev1.ConditionStatus(shared.str(string(c.Status))), Reason: shared.str(c.Reason),
				LastHeartbeatTime: c.LastHeartbeatTime, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	// In place, as transformPod, once everything kept was read from n.
	*n = out
	return n, nil
}

// newestManager names the one managedFields entry a cached Node keeps: only
// its time is real, the newest of the Node's entries.
const newestManager = "fedfailover-cache:newest-write"

// newestManagedTime reduces a Node's managedFields to one entry holding the
// newest time among them (the member API server's clock at the last change
// by any field manager); nil when none has a time.
func newestManagedTime(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var newest *metav1.Time
	for i := range entries {
		if t := entries[i].Time; t != nil && (newest == nil || t.After(newest.Time)) {
			newest = t
		}
	}
	if newest == nil {
		return nil
	}
	return []metav1.ManagedFieldsEntry{{Manager: newestManager, Time: &metav1.Time{Time: newest.Time}}}
}

// withoutLastApplied drops the last-applied annotation (a full copy of the
// object) from the freshly decoded object's map.
func withoutLastApplied(a map[string]string) map[string]string {
	delete(a, lastApplied)
	return a
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
