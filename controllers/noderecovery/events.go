package noderecovery

import (
	"context"
	"fmt"
	"os"
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

// maxNodeEventsPerPass caps the Events one pass writes to a member. They
// are written after every node has been decided and acted on, one request
// each behind the member's client rate limit: when a thousand nodes go
// NotReady at once (seen at 3 x 2,000 x 10 on an overloaded lab), writing
// them all held the member's pass, and so a taint due on the next one, for
// tens of seconds. The rest are only logged: the FailoverPolicy's events
// and decisions still say what happened to each node.
const maxNodeEventsPerPass = 50

// writeNodeEvents writes the pass's member Events, up to the cap.
func (r *Reconciler) writeNodeEvents(ctx context.Context, v *memberView) {
	log := ctrl.LoggerFrom(ctx)
	for i, ev := range v.nodeEvents {
		if i == maxNodeEventsPerPass {
			log.Info("Events on member Nodes not written: more than the cap in one pass",
				"written", maxNodeEventsPerPass, "skipped", len(v.nodeEvents)-maxNodeEventsPerPass)
			break
		}
		if err := v.client.Create(ctx, ev); err != nil {
			log.Error(err, "Writing event on member Node failed", "node", ev.InvolvedObject.Name)
		}
	}
	v.nodeEvents = nil
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
