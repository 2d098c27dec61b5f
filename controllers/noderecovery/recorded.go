package noderecovery

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// OutOfServiceTaint is the KEP-2268 taint, with the value the Kubernetes
// documentation uses.
var OutOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// recorded is what a node's NodeRecovery record says was done, read once per
// pass. It says what was done; it never authorizes a new destructive write.
type recorded struct {
	// Action is the method of the recorded intent; empty before any.
	Action    v1alpha1.RecoveryMethod
	FencedBy  string
	IntentAt  time.Time
	ActedAt   time.Time
	Recovered time.Time
	// LossAt is when fedfailover first saw the loss (host clock).
	LossAt time.Time
	Claims []string
	// OwnsTaint is true only when fedfailover itself added the node's
	// out-of-service taint: the intent was the taint method, no such taint was
	// there before, and the record is fedfailover's own (not migrated).
	OwnsTaint bool
	Migrated  bool
}

// Acted is true once an intent was recorded: the action may have happened.
func (m recorded) Acted() bool { return m.Action != "" }

func recordedOf(rec *v1alpha1.NodeRecovery) recorded {
	if rec == nil {
		return recorded{}
	}
	st := rec.Status
	m := recorded{Action: st.Method, FencedBy: st.Evidence, Claims: st.Claims, Migrated: st.Migrated,
		IntentAt: timeOf(st.IntentAt), ActedAt: timeOf(st.ActedAt), Recovered: timeOf(st.RecoveredAt), LossAt: timeOf(st.ObservedAt)}
	if st.IntentAt == nil {
		m.Action = ""
	}
	m.OwnsTaint = m.Action == v1alpha1.RecoveryMethodOutOfServiceTaint && !st.TaintPreexisting && !st.Migrated
	return m
}

// hasOutOfServiceTaint: any out-of-service taint, whoever put it.
func hasOutOfServiceTaint(taints []corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

// withTaint returns the taints plus the out-of-service taint, once.
func withTaint(taints []corev1.Taint) []corev1.Taint {
	if hasOutOfServiceTaint(taints) {
		return taints
	}
	return append(slices.Clone(taints), OutOfServiceTaint)
}

// withoutTaint drops only the exact taint fedfailover adds: an
// out-of-service taint with another value or effect was put by someone else.
func withoutTaint(taints []corev1.Taint) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool {
		return t.Key == OutOfServiceTaint.Key && t.Value == OutOfServiceTaint.Value && t.Effect == OutOfServiceTaint.Effect
	})
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
