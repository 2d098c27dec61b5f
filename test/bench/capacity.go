package bench

import (
	"fmt"
	"math"
)

// CostPoint is one measured size: the manager's memory with that many
// members and cached pods.
type CostPoint struct {
	Members int
	Pods    int
	MB      float64
}

// CostModel is memory = BaseMB + PerMemberMB × members + PerPodMB × pods.
type CostModel struct {
	BaseMB      float64 `json:"base_mb"`
	PerMemberMB float64 `json:"per_member_mb"`
	PerPodMB    float64 `json:"per_pod_mb"`
}

// FitCosts solves the model exactly from the process's memory with no
// member connected (base) and two measured sizes whose members-to-pods
// ratios differ (e.g. few large members and many small ones).
func FitCosts(baseMB float64, a, b CostPoint) (CostModel, error) {
	// (MB - base) = perMember·members + perPod·pods, two equations.
	a1, b1, c1 := float64(a.Members), float64(a.Pods), a.MB-baseMB
	a2, b2, c2 := float64(b.Members), float64(b.Pods), b.MB-baseMB
	det := a1*b2 - a2*b1
	if math.Abs(det) < 1e-9 {
		return CostModel{}, fmt.Errorf("sizes %d×%d pods and %d×%d pods have the same members-to-pods ratio", a.Members, a.Pods, b.Members, b.Pods)
	}
	return CostModel{
		BaseMB:      baseMB,
		PerMemberMB: (c1*b2 - c2*b1) / det,
		PerPodMB:    (a1*c2 - a2*c1) / det,
	}, nil
}

// Predict is the model's memory for a size.
func (m CostModel) Predict(members, pods int) float64 {
	return m.BaseMB + m.PerMemberMB*float64(members) + m.PerPodMB*float64(pods)
}

// MembersPerReplica is how many members of podsPerMember pods fit in
// limitMB by the model (0 when not even one does).
func (m CostModel) MembersPerReplica(limitMB float64, podsPerMember int) int {
	per := m.PerMemberMB + m.PerPodMB*float64(podsPerMember)
	if per <= 0 || limitMB <= m.BaseMB {
		return 0
	}
	return int((limitMB - m.BaseMB) / per)
}
