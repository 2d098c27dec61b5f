package noderecovery

import (
	"reflect"
	"slices"
	"sync"

	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// memberReport is the last pass's result for one member.
type memberReport struct {
	Policy       string
	Recoveries   []v1alpha1.NodeRecoveryStatus
	Storm        bool
	StormMessage string
}

// store hands the member passes' results to the policy status controller,
// and remembers which per-node transitions were already reported (events on
// transitions only).
type store struct {
	mu        sync.Mutex
	reports   map[string]memberReport
	decisions map[string][]v1alpha1.Decision // by policy, newest first
	last      map[string]string              // cluster/node -> transition key
	notify    chan event.GenericEvent
}

func newStore() *store {
	return &store{reports: map[string]memberReport{}, decisions: map[string][]v1alpha1.Decision{},
		last: map[string]string{}, notify: make(chan event.GenericEvent, 256)}
}

// publish records a member's report and wakes the status controller for the
// policies it concerns.
func (s *store) publish(cluster string, rep memberReport) {
	s.mu.Lock()
	old, had := s.reports[cluster]
	s.reports[cluster] = rep
	s.mu.Unlock()
	if had && reflect.DeepEqual(old, rep) {
		return
	}
	s.poke(rep.Policy)
	if had && old.Policy != rep.Policy {
		s.poke(old.Policy)
	}
}

// poke queues a status update; when the queue is full the status
// controller's periodic resync catches up.
func (s *store) poke(policy string) {
	if policy == "" {
		return
	}
	obj := &v1alpha1.FailoverPolicy{ObjectMeta: v1.ObjectMeta{Name: policy}}
	select {
	case s.notify <- event.GenericEvent{Object: obj}:
	default:
	}
}

// decide logs a decision under the policy that governed it.
func (s *store) decide(policy string, d v1alpha1.Decision) {
	s.mu.Lock()
	list := append([]v1alpha1.Decision{d}, s.decisions[policy]...)
	s.decisions[policy] = list[:min(len(list), policystatus.MaxDecisions)]
	s.mu.Unlock()
	s.poke(policy)
}

// snapshot returns the reports of the members a policy governs, sorted.
func (s *store) snapshot(policy string) (reps map[string]memberReport, decisions []v1alpha1.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reps = map[string]memberReport{}
	for c, r := range s.reports {
		if r.Policy == policy {
			reps[c] = r
		}
	}
	return reps, slices.Clone(s.decisions[policy])
}

// changed records key as the node's last reported transition and says
// whether it differs from the one before.
func (s *store) changed(cluster, node, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := cluster + "/" + node
	if s.last[k] == key {
		return false
	}
	s.last[k] = key
	return true
}

// transition records key without asking.
func (s *store) transition(cluster, node, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := cluster + "/" + node
	if key == "" {
		delete(s.last, k)
		return
	}
	s.last[k] = key
}
