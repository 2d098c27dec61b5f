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

// shiftedBefore says fedfailover's own placement was on the RSP when
// someone else edited it: the edit then changes what a failback restores,
// and it is reported (event, decision). An RSP at its baseline takes an
// edit (an autoscaler's totalReplicas, say) as its new spec, recorded but
// not reported: routine scaling would fill the policy's recentDecisions
// and write two events each time.
func shiftedBefore(recorded *contract.RebalanceState) bool {
	return recorded != nil && recorded.Applied != nil && !recorded.Applied.Equal(recorded.Baseline)
}

// sightedTimers are the member timers a pass starts from. The onsets that a
// shift waits on (failing, Unschedulable, room since) are this process's
// own sightings, from its previous pass: the annotation that records them
// can be written by anyone with access to the RSP (or restored from an old
// backup), and an onset taken from it could end clusterFailedAfter,
// capacityExhaustedAfter or the stabilization window at once. A recorded
// onset older than the process's own sighting never replaces it, and
// without a sighting of its own the wait starts at this pass. So after a
// restart, a change of leader or a hold each wait starts again from the
// process's first sighting: later, never sooner. The failback backoff is
// the larger of the two, and the last failback (what was done) is taken
// from the record when the process has none, since either only makes the
// next failback wait longer.
func sightedTimers(recorded, own contract.MemberTimers) contract.MemberTimers {
	t := own
	t.Backoff = max(recorded.Backoff, own.Backoff)
	if t.LastFailback == nil {
		t.LastFailback = recorded.LastFailback
	}
	return t
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
