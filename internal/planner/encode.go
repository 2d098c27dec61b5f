package planner

import (
	"time"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/internal/contract"
)

// result encodes a placement as spec.clusters. When it is exactly the
// baseline's (same total, no failed member), the user's own preferences are
// written back unchanged; otherwise every member is pinned (weight = min =
// max = its replicas) so kubefed places exactly what was planned, and
// entries for other clusters (and "*") are kept from the baseline.
func (p *planning) result(placement map[string]int64, total int64, reason string) Result {
	placement = fill(clone(placement), p.names)
	r := Result{
		TotalReplicas:  int32(min(total, 1<<31-1)),
		TemporaryTotal: total > p.total,
		Placement:      placement,
		Unplaced:       p.unplaced,
		Reason:         reason,
	}
	if total == p.total && !p.anyFailed() && equalPlacement(placement, p.baselined) {
		r.Clusters = copyPrefs(p.in.Baseline)
	} else {
		r.Clusters = p.pinned(placement)
		r.Shifted = true
	}
	r.Changed = !contract.EqualPreferences(r.Clusters, p.in.Current) || total != p.currentTotal
	if r.Changed {
		r.RequeueAt = p.requeueAfterChange(placement)
	}
	return r
}

// keep leaves the RSP as it is.
func (p *planning) keep(reason string, requeueAt time.Time) Result {
	return Result{
		Clusters:       copyPrefs(p.in.Current),
		TotalReplicas:  int32(p.currentTotal),
		TemporaryTotal: p.currentTotal > p.total,
		Shifted:        !contract.EqualPreferences(p.in.Current, p.in.Baseline),
		Placement:      fill(clone(p.current), p.names),
		Unplaced:       p.unplaced,
		Reason:         reason,
		RequeueAt:      requeueAt,
	}
}

func (p *planning) anyFailed() bool {
	for _, n := range p.names {
		if p.failed(n) {
			return true
		}
	}
	return false
}

func (p *planning) pinned(placement map[string]int64) map[string]fedschedv1a1.ClusterPreferences {
	out := map[string]fedschedv1a1.ClusterPreferences{}
	for name, prefs := range p.baseline {
		if _, member := p.in.Members[name]; !member {
			out[name] = *prefs.DeepCopy()
		}
	}
	for _, n := range p.names {
		v := placement[n]
		out[n] = fedschedv1a1.ClusterPreferences{MinReplicas: v, MaxReplicas: &v, Weight: v}
	}
	return out
}

func copyPrefs(in map[string]fedschedv1a1.ClusterPreferences) map[string]fedschedv1a1.ClusterPreferences {
	if in == nil {
		return nil
	}
	out := make(map[string]fedschedv1a1.ClusterPreferences, len(in))
	for n, prefs := range in {
		out[n] = *prefs.DeepCopy()
	}
	return out
}
