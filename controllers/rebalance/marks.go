package rebalance

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// The durable state of a managed RSP is contract.RebalanceState, in the
// annotation contract.AnnotationRebalance; this file holds what the
// controller decides about it.

func specPlacement(rsp *fedschedv1a1.ReplicaSchedulingPreference) contract.Placement {
	return contract.Placement{TotalReplicas: rsp.Spec.TotalReplicas, Clusters: rsp.Spec.Clusters}.Normalize()
}

// baselineOf resolves the state to plan with from the recorded state and
// the live spec: first touch records the spec as the baseline; fields that
// someone else changed since the controller last wrote (by field
// ownership, see adoptEdits) are adopted into the baseline, and then the
// old plan no longer applies, nor does its minInterval. It reports whether
// the baseline changed.
func baselineOf(recorded *contract.RebalanceState, live contract.Placement, owners fieldOwners, policy string) (m *contract.RebalanceState, edited bool) {
	cur := live.Normalize()
	if recorded == nil {
		return &contract.RebalanceState{Policy: policy, Baseline: cur, Applied: &cur}, false
	}
	m = recorded.Clone()
	m.Policy = policy
	switch {
	case m.Applied == nil:
		m.Baseline, m.Applied, m.LastChange = cur, &cur, nil
		return m, false
	case m.Applied.Equal(live):
		return m, false
	}
	next := adoptEdits(m.Baseline, *m.Applied, cur, owners)
	m.Applied = &cur
	if next.Equal(m.Baseline) {
		return m, false // fedfailover's own fields, or the baseline re-applied
	}
	m.Baseline, m.LastChange = next, nil
	return m, true
}

// timePtr is t as a timer of the state, to the second (what metav1.Time
// keeps through JSON); nil for zero.
func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func microPtr(t time.Time) *metav1.MicroTime {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewMicroTime(t.Truncate(time.Microsecond))
	return &mt
}

func microOf(t *metav1.MicroTime) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
