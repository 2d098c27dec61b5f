package noderecovery

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
)

func TestObserveMember(t *testing.T) {
	otherTaint := corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "by-hand", Effect: corev1.TaintEffectNoExecute}
	// A mark on the Node is no proof of ownership: only a record is.
	forged := map[string]string{contract.AnnotationTaintedBy: "true"}
	nodes := []*corev1.Node{
		node(corev1.ConditionTrue, t0, nil, OutOfServiceTaint),    // a: counted: Ready, our taint, our record
		node(corev1.ConditionFalse, t0, nil, OutOfServiceTaint),   // b: not Ready: the taint belongs there
		node(corev1.ConditionTrue, t0, forged, OutOfServiceTaint), // c: someone else's (no record)
		node(corev1.ConditionTrue, t0, nil, otherTaint),           // d: not the exact taint we add
		node(corev1.ConditionTrue, t0, nil),                       // e: taint already removed
		node(corev1.ConditionTrue, t0, map[string]string{}, corev1.Taint{Key: "x", Effect: corev1.TaintEffectNoSchedule}),
	}
	records := map[string]*v1alpha1.NodeRecovery{}
	for i, n := range nodes {
		n.Name = string(rune('a' + i))
		if n.Name != "c" {
			rec := actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, t0)
			rec.Spec.Node = n.Name
			records[n.Name] = rec
		}
	}
	recs := []v1alpha1.NodeRecoveryStatus{
		{Node: "a", Phase: v1alpha1.RecoveryPhaseBlocked}, {Node: "b", Phase: v1alpha1.RecoveryPhaseBlocked},
		{Node: "c", Phase: v1alpha1.RecoveryPhaseRecovering},
	}
	observeMember("gauge-test", nodes, records, recs)

	want := map[v1alpha1.RecoveryPhase]float64{v1alpha1.RecoveryPhaseBlocked: 2, v1alpha1.RecoveryPhaseRecovering: 1}
	for _, ph := range v1alpha1.RecoveryPhases {
		if got := testutil.ToFloat64(metrics.LostNodes.WithLabelValues("gauge-test", string(ph))); got != want[ph] {
			t.Errorf("lost_nodes{phase=%q} = %v, want %v", ph, got, want[ph])
		}
	}
	if got := testutil.ToFloat64(metrics.OutOfServiceReadyNodes.WithLabelValues("gauge-test")); got != 1 {
		t.Errorf("out_of_service_ready_nodes = %v, want 1", got)
	}

	// The next pass overwrites: the phase that emptied goes back to 0.
	observeMember("gauge-test", nil, nil, recs[2:])
	if got := testutil.ToFloat64(metrics.LostNodes.WithLabelValues("gauge-test", string(v1alpha1.RecoveryPhaseBlocked))); got != 0 {
		t.Errorf("lost_nodes{phase=Blocked} after the node left = %v, want 0", got)
	}
	if got := testutil.ToFloat64(metrics.OutOfServiceReadyNodes.WithLabelValues("gauge-test")); got != 0 {
		t.Errorf("out_of_service_ready_nodes without nodes = %v, want 0", got)
	}
}
