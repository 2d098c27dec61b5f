package rebalance

import (
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// StatusFieldOwner is the server-side apply field manager of
// status.rebalances (and of the rebalance entries it merges into
// status.recentDecisions, a list shared with node recovery: each writer
// merges its own decisions with the recorded ones).
const StatusFieldOwner = "fedfailover-rebalance"

const maxRebalances = 256

// store holds the per-RSP reports of the planning passes until the status
// reconciler writes them to their policy; it notifies that reconciler.
type store struct {
	mu        sync.Mutex
	entries   map[string]map[types.NamespacedName]v1alpha1.RebalanceStatus // by policy
	owner     map[types.NamespacedName]string                              // RSP -> policy
	decisions map[string][]v1alpha1.Decision
	notify    chan event.GenericEvent
}

func newStore() *store {
	return &store{entries: map[string]map[types.NamespacedName]v1alpha1.RebalanceStatus{},
		owner: map[types.NamespacedName]string{}, decisions: map[string][]v1alpha1.Decision{},
		notify: make(chan event.GenericEvent, 1024)}
}

func (s *store) poke(policy string) {
	if policy == "" {
		return
	}
	p := &v1alpha1.FailoverPolicy{}
	p.Name = policy
	select {
	case s.notify <- event.GenericEvent{Object: p}:
	default: // the queue is flooded; a pending write covers it
	}
}

// set records an RSP's entry (or its absence, show=false) and pokes the
// policy's status writer on a change.
func (s *store) set(policy string, key types.NamespacedName, st v1alpha1.RebalanceStatus, show bool) {
	s.mu.Lock()
	var changed []string
	if prev, ok := s.owner[key]; ok && prev != policy {
		delete(s.entries[prev], key)
		changed = append(changed, prev)
	}
	s.owner[key] = policy
	m := s.entries[policy]
	if m == nil {
		m = map[types.NamespacedName]v1alpha1.RebalanceStatus{}
		s.entries[policy] = m
	}
	old, had := m[key]
	switch {
	case show && (!had || !equalEntry(old, st)):
		m[key] = st
		changed = append(changed, policy)
	case !show && had:
		delete(m, key)
		changed = append(changed, policy)
	}
	s.mu.Unlock()
	for _, p := range changed {
		s.poke(p)
	}
}

func equalEntry(a, b v1alpha1.RebalanceStatus) bool {
	return a.Shifted == b.Shifted && a.Reason == b.Reason && timeOf(a.LastChangeTime).Equal(timeOf(b.LastChangeTime))
}

func (s *store) forget(key types.NamespacedName) {
	s.mu.Lock()
	policy, ok := s.owner[key]
	delete(s.owner, key)
	if ok {
		delete(s.entries[policy], key)
	}
	s.mu.Unlock()
	s.poke(policy)
}

func (s *store) decide(policy string, d v1alpha1.Decision) {
	s.mu.Lock()
	s.decisions[policy] = append([]v1alpha1.Decision{d}, s.decisions[policy]...)
	if len(s.decisions[policy]) > policystatus.MaxDecisions {
		s.decisions[policy] = s.decisions[policy][:policystatus.MaxDecisions]
	}
	s.mu.Unlock()
	s.poke(policy)
}

func (s *store) snapshot(policy string) ([]v1alpha1.RebalanceStatus, []v1alpha1.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []v1alpha1.RebalanceStatus
	for _, st := range s.entries[policy] {
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b v1alpha1.RebalanceStatus) int {
		return cmpString(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if len(out) > maxRebalances {
		out = out[:maxRebalances]
	}
	return out, slices.Clone(s.decisions[policy])
}

// statusReconciler writes status.rebalances and the rebalance decisions of
// one policy.
type statusReconciler struct {
	client client.Client
	store  *store
}

func (r *statusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pol := &v1alpha1.FailoverPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, pol); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rebalances, ours := r.store.snapshot(pol.Name)
	status := v1alpha1.FailoverPolicyStatus{
		Rebalances:      rebalances,
		RecentDecisions: policystatus.MergeDecisions(ours, pol.Status.RecentDecisions),
	}
	if err := policystatus.Apply(ctx, r.client, pol.Name, StatusFieldOwner, &status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}
