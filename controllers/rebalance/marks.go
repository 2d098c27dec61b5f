package rebalance

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"
)

// AnnotationState on a ReplicaSchedulingPreference holds everything the
// controller must remember across restarts (JSON of marks): the user's
// baseline, what it last wrote, when, and since when each member has been
// unhealthy or healthy with room. One annotation, so it is written in the
// same server-side apply as the spec it describes.
const AnnotationState = "failover.fedfailover.io/rebalance"

// placement is the part of an RSP spec the controller writes.
type placement struct {
	TotalReplicas int32                                      `json:"totalReplicas"`
	Clusters      map[string]fedschedv1a1.ClusterPreferences `json:"clusters,omitempty"`
}

// memberMarks are the per-member timers behind clusterFailedAfter and the
// failback stabilization window.
type memberMarks struct {
	// FailingSince: first seen disconnected or not Ready, without a healthy
	// observation since.
	FailingSince *metav1.Time `json:"failingSince,omitempty"`
	// RoomSince: first seen healthy with room, without a bad observation since.
	RoomSince *metav1.Time `json:"roomSince,omitempty"`
}

// marks is the durable state of one managed RSP.
type marks struct {
	Policy   string    `json:"policy,omitempty"`
	Baseline placement `json:"baseline"`
	// Applied is the placement last written; the live spec differing from
	// it means the user edited the RSP.
	Applied    *placement             `json:"applied,omitempty"`
	LastChange *metav1.Time           `json:"lastChange,omitempty"`
	Members    map[string]memberMarks `json:"members,omitempty"`
}

func specPlacement(rsp *fedschedv1a1.ReplicaSchedulingPreference) placement {
	return normalize(placement{TotalReplicas: rsp.Spec.TotalReplicas, Clusters: rsp.Spec.Clusters})
}

// normalize makes placements comparable with DeepEqual after a JSON round
// trip: no empty maps, deep copies.
func normalize(p placement) placement {
	out := placement{TotalReplicas: p.TotalReplicas}
	if len(p.Clusters) > 0 {
		out.Clusters = make(map[string]fedschedv1a1.ClusterPreferences, len(p.Clusters))
		for n, c := range p.Clusters {
			out.Clusters[n] = *c.DeepCopy()
		}
	}
	return out
}

func (p placement) equal(o placement) bool {
	a, b := normalize(p), normalize(o)
	if a.TotalReplicas != b.TotalReplicas || len(a.Clusters) != len(b.Clusters) {
		return false
	}
	for n, ca := range a.Clusters {
		cb, ok := b.Clusters[n]
		if !ok || ca.MinReplicas != cb.MinReplicas || ca.Weight != cb.Weight || !equalPtr(ca.MaxReplicas, cb.MaxReplicas) {
			return false
		}
	}
	return true
}

func equalPtr(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// decodeMarks reads the state annotation; absent means first touch.
func decodeMarks(annotations map[string]string) (*marks, error) {
	raw, ok := annotations[AnnotationState]
	if !ok {
		return nil, nil
	}
	m := &marks{}
	if err := json.Unmarshal([]byte(raw), m); err != nil {
		return nil, fmt.Errorf("decoding annotation %s: %w", AnnotationState, err)
	}
	return m, nil
}

func (m *marks) encode() string {
	b, err := json.Marshal(m)
	if err != nil {
		// Only plain data: cannot fail.
		panic(err)
	}
	return string(b)
}

func (m *marks) clone() *marks {
	if m == nil {
		return nil
	}
	out := *m
	out.Baseline = normalize(m.Baseline)
	if m.Applied != nil {
		a := normalize(*m.Applied)
		out.Applied = &a
	}
	out.Members = maps.Clone(m.Members)
	return &out
}

// baselineOf resolves the state to plan with from the recorded marks and
// the live spec: first touch records the spec as the baseline; a spec that
// differs from what the controller last wrote is a user edit and becomes
// the new baseline (the old plan no longer applies, nor does its
// minInterval). It reports whether the user edited.
func baselineOf(recorded *marks, live placement, policy string) (m *marks, edited bool) {
	cur := normalize(live)
	if recorded == nil {
		return &marks{Policy: policy, Baseline: cur, Applied: &cur}, false
	}
	m = recorded.clone()
	m.Policy = policy
	if m.Applied == nil || !m.Applied.equal(live) {
		edited = m.Applied != nil
		m.Baseline, m.Applied, m.LastChange = cur, &cur, nil
	}
	return m, edited
}

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
