package noderecovery

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// ReportingController names fedfailover in the events it writes to members.
const ReportingController = "fedfailover.io/noderecovery"

var reportingInstance, _ = os.Hostname()

// report is the one call for a transition: it logs, emits an event on the
// member Node and on the governing FailoverPolicy, and records a decision.
func (r *Reconciler) report(ctx context.Context, v *memberView, n *corev1.Node, eventType, reason, action, msg string) {
	log := ctrl.LoggerFrom(ctx)
	log.Info("Node recovery: "+msg, "reason", reason, "action", action)
	now := r.now()
	dry := r.dryRun(v)
	if !r.paused(v) && !dry { // paused or dry run: not even an event is written to the member
		v.nodeEvents = append(v.nodeEvents, r.nodeEvent(v, n, eventType, reason, action, msg, now))
	}
	if v.policy == nil {
		return
	}
	r.recorder.Eventf(v.policy, nil, eventType, reason, action, "%s/%s: %s", v.cluster, n.Name, msg)
	r.store.decide(v.policy.Name, decision(now, v.cluster, "Node/"+n.Name, action, reason, msg, dry))
}

func decision(now time.Time, cluster, object, action, reason, msg string, dry bool) v1alpha1.Decision {
	return v1alpha1.Decision{Time: metav1.NewTime(now), Cluster: cluster, Object: object,
		Action: action, Reason: reason, Message: policystatus.Truncate(msg, 512), DryRun: dry}
}

// nodeEvent is a core/v1 Event about the member Node, written directly:
// events are transitions only, so no broadcaster per member is needed.
func (r *Reconciler) nodeEvent(v *memberView, n *corev1.Node, eventType, reason, action, msg string, now time.Time) *corev1.Event {
	ts := metav1.NewTime(now)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", n.Name, now.UnixNano()), Namespace: metav1.NamespaceDefault},
		InvolvedObject: corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		Reason:         reason, Message: policystatus.Truncate(msg, 1024), Type: eventType, Action: action,
		Source:              corev1.EventSource{Component: "fedfailover"},
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
		ReportingController: ReportingController,
		ReportingInstance:   reportingInstance,
	}
	return ev
}

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
