package rebalance

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// TestRecordSetsShiftedGauge: the alert on RSPs held away from their
// baseline reads fedfailover_rsp_shifted, which record keeps current.
func TestRecordSetsShiftedGauge(t *testing.T) {
	r := &Reconciler{store: newStore()}
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: "gauge", Name: "web"}}
	shifted := func() float64 { return testutil.ToFloat64(metrics.RSPShifted.WithLabelValues("gauge", "web")) }

	r.record(pol, rsp, planner.Input{}, planner.Result{Shifted: true, Reason: planner.ReasonMemberFailed}, &contract.RebalanceState{})
	if got := shifted(); got != 1 {
		t.Errorf("after a shift: rsp_shifted = %v, want 1", got)
	}
	r.record(pol, rsp, planner.Input{}, planner.Result{Reason: planner.ReasonBalanced}, &contract.RebalanceState{})
	if got := shifted(); got != 0 {
		t.Errorf("back at the baseline: rsp_shifted = %v, want 0", got)
	}
	r.record(pol, rsp, planner.Input{}, planner.Result{Shifted: true, Reason: planner.ReasonMemberFailed}, &contract.RebalanceState{})
	metrics.DeleteRSP("gauge", "web")
	if n := testutil.CollectAndCount(metrics.RSPShifted); n != 0 {
		t.Errorf("after DeleteRSP: %d rsp_shifted series left, want 0", n)
	}
}
