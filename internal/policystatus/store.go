package policystatus

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Store hands a controller's passes to its status Writer: per object key
// (a member, an RSP) the last pass's entry and the policy it belongs to,
// and per policy the decisions not yet merged into status. Every change
// wakes the Writer for the policies it concerns.
type Store[K comparable, E any] struct {
	mu        sync.Mutex
	entries   map[K]owned[E]
	decisions map[string][]v1alpha1.Decision // by policy, newest first
	equal     func(a, b E) bool
	notify    chan event.GenericEvent
}

type owned[E any] struct {
	policy string
	entry  E
}

// NewStore returns a store; equal tells an unchanged entry (no wake-up),
// queue bounds the wake-ups waiting for the Writer.
func NewStore[K comparable, E any](equal func(a, b E) bool, queue int) *Store[K, E] {
	return &Store[K, E]{entries: map[K]owned[E]{}, decisions: map[string][]v1alpha1.Decision{},
		equal: equal, notify: make(chan event.GenericEvent, queue)}
}

// Set records key's entry under policy ("" when no policy governs it).
func (s *Store[K, E]) Set(key K, policy string, e E) {
	s.mu.Lock()
	old, had := s.entries[key]
	s.entries[key] = owned[E]{policy: policy, entry: e}
	s.mu.Unlock()
	if had && old.policy == policy && s.equal(old.entry, e) {
		return
	}
	s.poke(policy)
	if had && old.policy != policy {
		s.poke(old.policy)
	}
}

// Delete forgets key.
func (s *Store[K, E]) Delete(key K) {
	s.mu.Lock()
	old, had := s.entries[key]
	delete(s.entries, key)
	s.mu.Unlock()
	if had {
		s.poke(old.policy)
	}
}

// Decide logs a decision under the policy that governed it.
func (s *Store[K, E]) Decide(policy string, d v1alpha1.Decision) {
	s.mu.Lock()
	list := append([]v1alpha1.Decision{d}, s.decisions[policy]...)
	s.decisions[policy] = list[:min(len(list), MaxDecisions)]
	s.mu.Unlock()
	s.poke(policy)
}

// Snapshot returns the policy's entries by key and its decisions.
func (s *Store[K, E]) Snapshot(policy string) (map[K]E, []v1alpha1.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[K]E{}
	for k, o := range s.entries {
		if o.policy == policy {
			out[k] = o.entry
		}
	}
	return out, slices.Clone(s.decisions[policy])
}

// Each calls fn with each of the policy's entries, under the store's lock
// and without copying them: for a reading every pass makes (a count), where
// a Snapshot per pass copies every entry of the policy. fn must not call
// the store.
func (s *Store[K, E]) Each(policy string, fn func(K, E)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, o := range s.entries {
		if o.policy == policy {
			fn(k, o.entry)
		}
	}
}

// poke queues a status write; when the queue is full a write is already
// pending (or the Writer's resync catches up).
func (s *Store[K, E]) poke(policy string) {
	if policy == "" {
		return
	}
	obj := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: policy}}
	select {
	case s.notify <- event.GenericEvent{Object: obj}:
	default:
	}
}

// Pending counts the queued wake-ups (tests).
func (s *Store[K, E]) Pending() int { return len(s.notify) }
