package rebalance

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// TestRecordSetsGauges: the alerts on RSPs held away from their baseline
// and on the federation guard read fedfailover_rsp_shifted and
// fedfailover_rsp_guard_held, which record keeps current.
func TestRecordSetsGauges(t *testing.T) {
	r := &Reconciler{store: newStore()}
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: "gauge", Name: "web"}}
	shifted := func() float64 { return testutil.ToFloat64(metrics.RSPShifted.WithLabelValues("gauge", "web")) }
	held := func() float64 { return testutil.ToFloat64(metrics.RSPGuardHeld.WithLabelValues("gauge", "web")) }

	r.record(pol, rsp, planner.Input{}, planner.Result{Shifted: true, Reason: planner.ReasonMemberFailed}, &contract.RebalanceState{})
	if shifted() != 1 || held() != 0 {
		t.Errorf("after a shift: rsp_shifted = %v, rsp_guard_held = %v; want 1, 0", shifted(), held())
	}
	r.record(pol, rsp, planner.Input{}, planner.Result{Shifted: true, Reason: planner.ReasonTooManyMembersFailed}, &contract.RebalanceState{})
	if shifted() != 1 || held() != 1 {
		t.Errorf("held by the guard: rsp_shifted = %v, rsp_guard_held = %v; want 1, 1", shifted(), held())
	}
	r.record(pol, rsp, planner.Input{}, planner.Result{Reason: planner.ReasonBalanced}, &contract.RebalanceState{})
	if shifted() != 0 || held() != 0 {
		t.Errorf("back at the baseline: rsp_shifted = %v, rsp_guard_held = %v; want 0, 0", shifted(), held())
	}
	metrics.DeleteRSP("gauge", "web")
	// Other tests of the package leave series of their own RSPs.
	if metrics.RSPShifted.DeleteLabelValues("gauge", "web") || metrics.RSPGuardHeld.DeleteLabelValues("gauge", "web") {
		t.Error("after DeleteRSP: series of gauge/web left")
	}
}

// BenchmarkRecordGoalPolicy is one RSP pass's record under a policy of 500
// RSPs (the goal size), its entry unchanged: at 500 RSPs every 30 s resync
// makes 500 of them.
func BenchmarkRecordGoalPolicy(b *testing.B) {
	r := &Reconciler{store: newStore()}
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}
	rsps := make([]*fedschedv1a1.ReplicaSchedulingPreference, 500)
	for i := range rsps {
		rsps[i] = &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("web-%d", i)}}
		r.record(pol, rsps[i], planner.Input{}, planner.Result{Reason: planner.ReasonBalanced}, &contract.RebalanceState{})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r.record(pol, rsps[i%len(rsps)], planner.Input{}, planner.Result{Reason: planner.ReasonBalanced}, &contract.RebalanceState{})
	}
}
