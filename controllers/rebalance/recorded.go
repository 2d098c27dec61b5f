package rebalance

import (
	"time"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"
)

// Recorded is the read-only view of an RSP's AnnotationState for tools that
// only read the host (the kubectl failover CLI).
type Recorded struct {
	// Policy is the FailoverPolicy that manages the RSP.
	Policy string
	// BaselineTotal and Baseline are the user's spec as first seen.
	BaselineTotal int32
	Baseline      map[string]fedschedv1a1.ClusterPreferences
	// LastChange is when the controller last changed the RSP (zero: never).
	LastChange time.Time
	// FailingSince and RoomSince are the per-member timers.
	FailingSince map[string]time.Time
	RoomSince    map[string]time.Time
}

// DecodeRecorded reads AnnotationState; nil without error when absent.
func DecodeRecorded(annotations map[string]string) (*Recorded, error) {
	m, err := decodeMarks(annotations)
	if err != nil || m == nil {
		return nil, err
	}
	r := &Recorded{Policy: m.Policy, BaselineTotal: m.Baseline.TotalReplicas, Baseline: m.Baseline.Clusters,
		LastChange: timeOf(m.LastChange), FailingSince: map[string]time.Time{}, RoomSince: map[string]time.Time{}}
	for name, mm := range m.Members {
		if mm.FailingSince != nil {
			r.FailingSince[name] = mm.FailingSince.Time
		}
		if mm.RoomSince != nil {
			r.RoomSince[name] = mm.RoomSince.Time
		}
	}
	return r, nil
}
