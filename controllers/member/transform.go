package member

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/fedfailover/fedfailover/internal/capacity"
)

// The member caches keep only what fedfailover's decisions read. The cached
// objects are therefore partial: never Update one (that would write the
// stripped fields back empty); Patch, or read the full object with the
// uncached client.
//
// Cached objects also share values with each other (see sharedValues):
// like everything in an informer cache they are read-only. Readers that
// list with UnsafeDisableDeepCopy, and event handlers, must never modify
// them.

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// trimMeta drops managedFields and the last-applied annotation (a full copy
// of the object).
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	// The informer owns the freshly decoded object: editing in place is safe.
	delete(m.Annotations, lastApplied)
}

// transformPod keeps what the decisions read of a Pod:
//
//   - name, namespace, uid (force-delete precondition), resourceVersion,
//     labels (workload and pod-scope selectors), ownerReferences (DaemonSet
//     pods are not force-deleted), deletionTimestamp;
//   - spec.nodeName, the PVC and ephemeral volumes (claim tracking, without
//     the claim template: an ephemeral claim is named <pod>-<volume>);
//   - the pod's effective requests (capacity.PodRequests) as pod-level
//     requests, in place of the containers, init containers and overhead:
//     capacity.PodRequests gives the same answer for the cached pod, and a
//     Container costs 400 bytes before its requests;
//   - status.phase and the Ready and PodScheduled conditions (type, status,
//     reason, lastTransitionTime: Unschedulable-since is the exhaustion
//     signal).
//
// Nothing else is read (annotations, tolerations, nodeSelector, priority,
// containers' images, limits and statuses, IPs, messages ...). Pods are
// most of a member's cache, so every byte kept here is paid per pod: the
// values many pods repeat are shared rather than copied.
func transformPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones pass through
	}
	out := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: shared.str(p.APIVersion), Kind: shared.str(p.Kind)},
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         shared.str(p.Namespace),
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Generation:        p.Generation,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
			Labels:            shared.labels(p.Labels, p.Name),
			OwnerReferences:   shared.owners(p.OwnerReferences),
		},
		Spec: corev1.PodSpec{
			NodeName:  shared.str(p.Spec.NodeName),
			Volumes:   claimVolumes(p.Spec.Volumes),
			Resources: shared.requests(capacity.PodRequests(&p.Spec)),
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodPhase(shared.str(string(p.Status.Phase))),
			Conditions: decisionConditions(p.Status.Conditions),
		},
	}
	return out, nil
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

// decisionConditions keeps Ready and PodScheduled without their messages.
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
			out = append(out, corev1.PodCondition{Type: corev1.PodConditionType(shared.str(string(c.Type))),
				Status: corev1.ConditionStatus(shared.str(string(c.Status))), Reason: shared.str(c.Reason),
				LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
}

// transformNode keeps what the decisions read of a Node: name, uid (events),
// resourceVersion (optimistic-lock patches), labels (node selection),
// annotations (recovery marks, external fence marks), deletionTimestamp,
// spec.taints (whole: patches replace the list) and spec.unschedulable,
// status.allocatable, and the Ready condition (status, reason,
// lastTransitionTime: how long a node has been lost). Images, capacity,
// addresses, nodeInfo, the other conditions and heartbeats are dropped.
func transformNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
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
			Labels:      shared.strMap(n.Labels, n.Name, true),
			Annotations: shared.strMap(withoutLastApplied(n.Annotations), n.Name, false),
		},
		Spec: corev1.NodeSpec{Taints: n.Spec.Taints, Unschedulable: n.Spec.Unschedulable},
		Status: corev1.NodeStatus{
			Allocatable: shared.list(n.Status.Allocatable),
		},
	}
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady,
				Status: corev1.ConditionStatus(shared.str(string(c.Status))), Reason: shared.str(c.Reason),
				LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	return out, nil
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

// shared holds, for every member cache, one copy of each value that many
// cached objects repeat: namespaces, node names, label keys and values, the
// label set of a ReplicaSet's pods, their ownerReferences, their requests.
// A decoded object holds its own copy of each; without sharing 20,000 pods
// of a few workloads hold 20,000 equal label maps and request lists.
var shared = newSharedValues()

// Tables are bounded: a full one starts over, so values only deleted
// objects used are not kept for ever. Sharing then resumes with the next
// objects; equal values already cached keep their (equal) copies.
const (
	maxSharedStrings = 1 << 16
	maxSharedValues  = 1 << 13
)

type sharedValues struct {
	seed maphash.Seed

	mu          sync.Mutex
	strs        map[string]string
	labelMaps   table[map[string]string]
	ownerLists  table[[]metav1.OwnerReference]
	volumeLists table[[]corev1.Volume]
	lists       table[corev1.ResourceList]
	reqs        table[*corev1.ResourceRequirements]
}

func newSharedValues() *sharedValues {
	return &sharedValues{seed: maphash.MakeSeed()}
}

// reset forgets every shared value (tests measure from a known state).
func (s *sharedValues) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strs = nil
	s.labelMaps, s.ownerLists, s.volumeLists = table[map[string]string]{}, table[[]metav1.OwnerReference]{}, table[[]corev1.Volume]{}
	s.lists, s.reqs = table[corev1.ResourceList]{}, table[*corev1.ResourceRequirements]{}
}

// str returns the shared copy of v.
func (s *sharedValues) str(v string) string {
	if v == "" {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.strLocked(v)
}

func (s *sharedValues) strLocked(v string) string {
	if v == "" {
		return ""
	}
	if c, ok := s.strs[v]; ok {
		return c
	}
	if s.strs == nil || len(s.strs) >= maxSharedStrings {
		s.strs = make(map[string]string)
	}
	// A copy: v may be part of a larger buffer the decoder allocated.
	c := strings.Clone(v)
	s.strs[c] = c
	return c
}

// strMap copies m with shared strings (values too if withValues); a value
// equal to self (the object's name: hostname, pod-name labels) reuses self.
func (s *sharedValues) strMap(m map[string]string, self string, withValues bool) map[string]string {
	if len(m) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.strMapLocked(m, self, withValues)
}

func (s *sharedValues) strMapLocked(m map[string]string, self string, withValues bool) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		switch {
		case v == self:
			v = self
		case withValues:
			v = s.strLocked(v)
		}
		out[s.strLocked(k)] = v
	}
	return out
}

// labels returns the shared label map equal to m: the pods of one
// ReplicaSet, DaemonSet or Job have the same labels.
func (s *sharedValues) labels(m map[string]string, self string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	var sum uint64
	for k, v := range m {
		// Summed: map order must not matter.
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)
		sum += h.Sum64()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.labelMaps.get(sum, m, maps.Equal[map[string]string], func(m map[string]string) map[string]string {
		return s.strMapLocked(m, self, true)
	})
}

// owners returns the shared ownerReferences equal to refs: one per owner.
func (s *sharedValues) owners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	var h maphash.Hash
	h.SetSeed(s.seed)
	for i := range refs {
		h.WriteString(refs[i].APIVersion)
		h.WriteByte(0)
		h.WriteString(refs[i].Kind)
		h.WriteByte(0)
		h.WriteString(refs[i].Name)
		h.WriteByte(0)
		h.WriteString(string(refs[i].UID))
		h.WriteByte(0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownerLists.get(h.Sum64(), refs, equalOwners, func(refs []metav1.OwnerReference) []metav1.OwnerReference {
		out := make([]metav1.OwnerReference, len(refs))
		for i, r := range refs {
			out[i] = metav1.OwnerReference{APIVersion: s.strLocked(r.APIVersion), Kind: s.strLocked(r.Kind), Name: r.Name,
				UID: r.UID, Controller: r.Controller, BlockOwnerDeletion: r.BlockOwnerDeletion}
		}
		return out
	})
}

func equalOwners(a, b []metav1.OwnerReference) bool {
	return slices.EqualFunc(a, b, equalOwner)
}

func equalOwner(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		equalBoolPtr(a.Controller, b.Controller) && equalBoolPtr(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func equalBoolPtr(a, b *bool) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// volumes returns the shared claim volumes equal to vs (PVC or ephemeral
// volumes with only their names and claim names, as claimVolumes makes).
func (s *sharedValues) volumes(vs []corev1.Volume) []corev1.Volume {
	var h maphash.Hash
	h.SetSeed(s.seed)
	for i := range vs {
		h.WriteString(vs[i].Name)
		h.WriteByte(0)
		if c := vs[i].PersistentVolumeClaim; c != nil {
			h.WriteString(c.ClaimName)
		}
		h.WriteByte(0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.volumeLists.get(h.Sum64(), vs, equalVolumes, func(vs []corev1.Volume) []corev1.Volume {
		for i := range vs {
			vs[i].Name = s.strLocked(vs[i].Name)
		}
		return vs
	})
}

// equalVolumes compares what claimVolumes keeps.
func equalVolumes(a, b []corev1.Volume) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.Volume) bool {
		return x.Name == y.Name && (x.Ephemeral == nil) == (y.Ephemeral == nil) &&
			(x.PersistentVolumeClaim == nil) == (y.PersistentVolumeClaim == nil) &&
			(x.PersistentVolumeClaim == nil || x.PersistentVolumeClaim.ClaimName == y.PersistentVolumeClaim.ClaimName)
	})
}

// list returns the shared resource list equal to l (same quantities and
// formats, so even String() is unchanged): nodes of one pool have the same
// allocatable.
func (s *sharedValues) list(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return nil
	}
	h := s.hashList(l)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(h, l)
}

func (s *sharedValues) listLocked(h uint64, l corev1.ResourceList) corev1.ResourceList {
	return s.lists.get(h, l, equalList, func(l corev1.ResourceList) corev1.ResourceList {
		out := make(corev1.ResourceList, len(l))
		for name, q := range l {
			out[corev1.ResourceName(s.strLocked(string(name)))] = q.DeepCopy()
		}
		return out
	})
}

// requests returns the shared pod-level requirements with these requests
// (nil for none): the pods of one workload request the same.
func (s *sharedValues) requests(l corev1.ResourceList) *corev1.ResourceRequirements {
	if len(l) == 0 {
		return nil
	}
	h := s.hashList(l)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs.get(h, &corev1.ResourceRequirements{Requests: l}, func(a, b *corev1.ResourceRequirements) bool {
		return equalList(a.Requests, b.Requests)
	}, func(r *corev1.ResourceRequirements) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Requests: s.listLocked(h, r.Requests)}
	})
}

func (s *sharedValues) hashList(l corev1.ResourceList) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	var sum uint64
	for name, q := range l {
		// Equal quantities have equal milli-values (the converse need not
		// hold: equalList decides).
		h.Reset()
		h.WriteString(string(name))
		h.WriteByte(0)
		h.WriteString(string(q.Format))
		v := q.MilliValue()
		for range 8 {
			h.WriteByte(byte(v))
			v >>= 8
		}
		sum += h.Sum64()
	}
	return sum
}

func equalList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, qa := range a {
		qb, ok := b[name]
		if !ok || qa.Format != qb.Format || qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}

// table maps a hash to the one shared value with that hash.
type table[V any] struct {
	m map[uint64]V
}

// get returns the shared value equal to v, first storing own(v) if there is
// none. A hash taken by an unequal value leaves own(v) unshared. The caller
// holds the lock.
func (t *table[V]) get(h uint64, v V, equal func(a, b V) bool, own func(V) V) V {
	if c, ok := t.m[h]; ok {
		if equal(c, v) {
			return c
		}
		return own(v)
	}
	if t.m == nil || len(t.m) >= maxSharedValues {
		t.m = make(map[uint64]V)
	}
	c := own(v)
	t.m[h] = c
	return c
}
