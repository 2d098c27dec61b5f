package noderecovery

import (
	"reflect"
	"sync"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// memberReport is the last pass's result for one member.
type memberReport struct {
	Policy       string
	Recoveries   []v1alpha1.NodeRecoveryStatus
	Storm        bool
	StormMessage string
	// TaintsLeft says, per node, why a taint fedfailover added is still there
	// although it should go (node Ready, volume still attached; member not
	// reachable).
	TaintsLeft []string
}

// store hands the member passes' results to the policy status writer
// (policystatus.Store, one entry per member), and remembers which per-node
// transitions were already reported (events on transitions only).
type store struct {
	reports *policystatus.Store[string, memberReport]

	mu   sync.Mutex
	last map[string]string // cluster/node -> transition key
}

func newStore() *store {
	return &store{reports: policystatus.NewStore[string](reportsEqual, 256), last: map[string]string{}}
}

func reportsEqual(a, b memberReport) bool { return reflect.DeepEqual(a, b) }

// publish records a member's report under the policy that governs it.
func (s *store) publish(cluster string, rep memberReport) { s.reports.Set(cluster, rep.Policy, rep) }

// decide logs a decision under the policy that governed it.
func (s *store) decide(policy string, d v1alpha1.Decision) { s.reports.Decide(policy, d) }

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
