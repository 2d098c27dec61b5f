package contract

import (
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// RebalanceState is the durable state of one managed RSP, kept in its
// RebalanceRecord (v1alpha1): the user's baseline, what was last written
// and when, and since when each member has been failing or healthy with
// room. Older fedfailovers kept it in AnnotationRebalance on the RSP; that
// annotation is read once, as a hint, to seed the record.
type RebalanceState struct {
	// Policy is the FailoverPolicy that manages the RSP.
	Policy   string    `json:"policy,omitempty"`
	Baseline Placement `json:"baseline"`
	// Applied is the placement last written; the live spec differing from
	// it means the user edited the RSP.
	Applied *Placement `json:"applied,omitempty"`
	// LastChange is when the controller last changed the RSP (nil: never).
	LastChange *metav1.Time            `json:"lastChange,omitempty"`
	Members    map[string]MemberTimers `json:"members,omitempty"`
}

// Placement is the part of an RSP spec the rebalance controller writes.
type Placement struct {
	TotalReplicas int32                                      `json:"totalReplicas"`
	Clusters      map[string]fedschedv1a1.ClusterPreferences `json:"clusters,omitempty"`
}

// MemberTimers are the per-member timers behind clusterFailedAfter and the
// failback stabilization window.
type MemberTimers struct {
	// FailingSince: first seen disconnected or not Ready, without a healthy
	// observation since.
	FailingSince *metav1.Time `json:"failingSince,omitempty"`
	// UnschedulableSince: first seen with an Unschedulable pod (on the
	// host's clock), without an observation free of them since. In
	// microseconds: whole seconds would end capacityExhaustedAfter up to a
	// second early.
	UnschedulableSince *metav1.MicroTime `json:"unschedulableSince,omitempty"`
	// RoomSince: first seen healthy with room, without a bad observation since.
	RoomSince *metav1.Time `json:"roomSince,omitempty"`
	// LastFailback: when replicas were last moved back to the member; set
	// until the member passes its (backed-off) stabilization window after
	// it without running out of capacity.
	LastFailback *metav1.Time `json:"lastFailback,omitempty"`
	// Backoff: how many times in a row the member ran out of capacity right
	// after a failback; its next failback waits the stabilization window
	// doubled that many times.
	Backoff int `json:"backoff,omitempty"`
}

// DecodeRebalanceState reads the legacy AnnotationRebalance; nil without
// error when it is absent.
func DecodeRebalanceState(annotations map[string]string) (*RebalanceState, error) {
	raw, ok := annotations[AnnotationRebalance]
	if !ok {
		return nil, nil
	}
	s := &RebalanceState{}
	if err := json.Unmarshal([]byte(raw), s); err != nil {
		return nil, fmt.Errorf("decoding annotation %s: %w", AnnotationRebalance, err)
	}
	return s, nil
}

// Encode returns the legacy annotation value.
func (s *RebalanceState) Encode() string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return string(b)
}

// Clone is a copy that shares nothing mutable with s.
func (s *RebalanceState) Clone() *RebalanceState {
	if s == nil {
		return nil
	}
	out := *s
	out.Baseline = s.Baseline.Normalize()
	if s.Applied != nil {
		a := s.Applied.Normalize()
		out.Applied = &a
	}
	out.Members = maps.Clone(s.Members)
	return &out
}

// Normalize makes placements comparable after a JSON round trip: no empty
// map, deep copies.
func (p Placement) Normalize() Placement {
	out := Placement{TotalReplicas: p.TotalReplicas}
	if len(p.Clusters) > 0 {
		out.Clusters = make(map[string]fedschedv1a1.ClusterPreferences, len(p.Clusters))
		for n, c := range p.Clusters {
			out.Clusters[n] = *c.DeepCopy()
		}
	}
	return out
}

// Equal compares what the placement says: total, and per cluster the
// weight, minReplicas and maxReplicas (unset differs from 0).
func (p Placement) Equal(o Placement) bool {
	return p.TotalReplicas == o.TotalReplicas && EqualPreferences(p.Clusters, o.Clusters)
}

// EqualPreferences compares RSP spec.clusters by value (weights, min, max).
func EqualPreferences(a, b map[string]fedschedv1a1.ClusterPreferences) bool {
	if len(a) != len(b) {
		return false
	}
	for n, pa := range a {
		pb, ok := b[n]
		if !ok || pa.MinReplicas != pb.MinReplicas || pa.Weight != pb.Weight || !equalPtr(pa.MaxReplicas, pb.MaxReplicas) {
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

// FinalizerRebalance on a FailoverPolicy with rebalancing enabled: before
// the policy goes (or once rebalancing is turned off), every RSP it shifted
// gets its baseline back and its RebalanceRecord is marked released.
const FinalizerRebalance = "failover.fedfailover.io/rebalance"

// StateFromRecord is the state a RebalanceRecord holds.
func StateFromRecord(spec *v1alpha1.RebalanceRecordSpec) *RebalanceState {
	s := &RebalanceState{Policy: spec.Policy, Baseline: placementFromAPI(spec.Baseline), LastChange: spec.LastChange.DeepCopy()}
	if spec.Applied != nil {
		a := placementFromAPI(*spec.Applied)
		s.Applied = &a
	}
	if len(spec.Members) > 0 {
		s.Members = make(map[string]MemberTimers, len(spec.Members))
		for n, t := range spec.Members {
			s.Members[n] = MemberTimers{FailingSince: t.FailingSince.DeepCopy(), UnschedulableSince: t.UnschedulableSince.DeepCopy(),
				RoomSince: t.RoomSince.DeepCopy(), LastFailback: t.LastFailback.DeepCopy(), Backoff: int(t.Backoff)}
		}
	}
	return s
}

// RecordSpec is the state as a RebalanceRecord holds it (the RSP's UID
// and the record's flags left to the caller).
func (s *RebalanceState) RecordSpec() v1alpha1.RebalanceRecordSpec {
	out := v1alpha1.RebalanceRecordSpec{Policy: s.Policy, Baseline: placementToAPI(s.Baseline), LastChange: s.LastChange.DeepCopy()}
	if s.Applied != nil {
		a := placementToAPI(*s.Applied)
		out.Applied = &a
	}
	if len(s.Members) > 0 {
		out.Members = make(map[string]v1alpha1.RebalanceMemberTimers, len(s.Members))
		for n, t := range s.Members {
			out.Members[n] = v1alpha1.RebalanceMemberTimers{FailingSince: t.FailingSince.DeepCopy(), UnschedulableSince: t.UnschedulableSince.DeepCopy(),
				RoomSince: t.RoomSince.DeepCopy(), LastFailback: t.LastFailback.DeepCopy(), Backoff: int32(min(max(t.Backoff, 0), MaxBackoff))} //nolint:gosec // bounded
		}
	}
	return out
}

// MaxBackoff is the highest failback backoff level (its window is capped
// at an hour besides): a recorded level above it is taken as MaxBackoff.
const MaxBackoff = 8

func placementFromAPI(p v1alpha1.RebalancePlacement) Placement {
	out := Placement{TotalReplicas: p.TotalReplicas}
	if len(p.Clusters) > 0 {
		out.Clusters = make(map[string]fedschedv1a1.ClusterPreferences, len(p.Clusters))
		for n, c := range p.Clusters {
			out.Clusters[n] = fedschedv1a1.ClusterPreferences{MinReplicas: c.MinReplicas, MaxReplicas: copyInt(c.MaxReplicas), Weight: c.Weight}
		}
	}
	return out
}

func placementToAPI(p Placement) v1alpha1.RebalancePlacement {
	out := v1alpha1.RebalancePlacement{TotalReplicas: p.TotalReplicas}
	if len(p.Clusters) > 0 {
		out.Clusters = make(map[string]v1alpha1.RebalanceClusterPreferences, len(p.Clusters))
		for n, c := range p.Clusters {
			out.Clusters[n] = v1alpha1.RebalanceClusterPreferences{MinReplicas: c.MinReplicas, MaxReplicas: copyInt(c.MaxReplicas), Weight: c.Weight}
		}
	}
	return out
}

func copyInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Valid reports what makes a placement impossible as an RSP spec
// (negative counts, maxReplicas below minReplicas); nil when none.
func (p Placement) Valid() error {
	if p.TotalReplicas < 0 {
		return fmt.Errorf("totalReplicas %d < 0", p.TotalReplicas)
	}
	for n, c := range p.Clusters {
		if n == "" || c.MinReplicas < 0 || c.Weight < 0 || (c.MaxReplicas != nil && (*c.MaxReplicas < 0 || *c.MaxReplicas < c.MinReplicas)) {
			return fmt.Errorf("cluster %q: invalid preferences (min %d, max %v, weight %d)", n, c.MinReplicas, c.MaxReplicas, c.Weight)
		}
	}
	return nil
}
