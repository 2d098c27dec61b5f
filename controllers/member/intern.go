package member

import (
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	conds       table[[]corev1.PodCondition]
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
	s.conds = table[[]corev1.PodCondition]{}
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

// strList copies a short list of strings (a pod's finalizers) with shared
// strings; nil stays nil, so pods without finalizers cost nothing.
func (s *sharedValues) strList(v []string) []string {
	if len(v) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(v))
	for i := range v {
		out[i] = s.strLocked(v[i])
	}
	return out
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

// conditions returns the shared pod conditions equal to cs (type, status
// and reason only, as decisionConditions makes).
func (s *sharedValues) conditions(cs []corev1.PodCondition) []corev1.PodCondition {
	var h maphash.Hash
	h.SetSeed(s.seed)
	for i := range cs {
		h.WriteString(string(cs[i].Type))
		h.WriteByte(0)
		h.WriteString(string(cs[i].Status))
		h.WriteByte(0)
		h.WriteString(cs[i].Reason)
		h.WriteByte(0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conds.get(h.Sum64(), cs, slices.Equal[[]corev1.PodCondition], func(cs []corev1.PodCondition) []corev1.PodCondition {
		for i := range cs {
			c := &cs[i]
			c.Type = corev1.PodConditionType(s.strLocked(string(c.Type)))
			c.Status = corev1.ConditionStatus(s.strLocked(string(c.Status)))
			c.Reason = s.strLocked(c.Reason)
		}
		return cs
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
