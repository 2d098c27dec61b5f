package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// RSPRow is one ReplicaSchedulingPreference: its baseline (the user's
// spec, as recorded by fedfailover) next to what it asks for now.
type RSPRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Policy manages the RSP; empty when none does.
	Policy        string          `json:"policy,omitempty"`
	TotalReplicas int32           `json:"totalReplicas"`
	BaselineTotal int32           `json:"baselineTotalReplicas"`
	Shifted       bool            `json:"shifted"`
	Reason        string          `json:"reason,omitempty"`
	LastChange    *metav1.Time    `json:"lastChangeTime,omitempty"`
	Clusters      []RSPClusterRow `json:"clusters"`
	// Held says why the RSP is left as it is: the policy that manages it
	// has a selector that cannot be parsed.
	Held string `json:"held,omitempty"`
	// Error is set when the state annotation cannot be read.
	Error string `json:"error,omitempty"`
}

// RSPClusterRow is one cluster entry of an RSP.
type RSPClusterRow struct {
	Cluster  string                           `json:"cluster"`
	Baseline *fedschedv1a1.ClusterPreferences `json:"baseline,omitempty"`
	Current  *fedschedv1a1.ClusterPreferences `json:"current,omitempty"`
	// Replicas is how many replicas the current spec places there (kubefed's
	// distribution over the member clusters); nil for entries that are not
	// member clusters (e.g. "*").
	Replicas *int64 `json:"replicas,omitempty"`
}

func rspRows(s *Snapshot) []RSPRow {
	out := make([]RSPRow, 0, len(s.RSPs))
	for i := range s.RSPs {
		out = append(out, rspRow(s, &s.RSPs[i]))
	}
	return out
}

func rspRow(s *Snapshot, rsp *fedschedv1a1.ReplicaSchedulingPreference) RSPRow {
	r := RSPRow{Namespace: rsp.Namespace, Name: rsp.Name, TotalReplicas: rsp.Spec.TotalReplicas}
	base, err := s.baselineOf(rsp)
	if err != nil {
		r.Error = err.Error()
	}
	r.BaselineTotal = base.total
	members := s.clusterNames()
	sel := s.rebalancePolicy(rsp)
	switch p := sel.Governing; {
	case sel.Held != nil:
		r.Policy, r.Reason, r.Held = sel.Held.Policy.Name, v1alpha1.ReasonInvalidSelector, sel.Held.Err.Error()
		r.Shifted = base.shifted(rsp)
		if base.recorded != nil {
			r.LastChange = base.recorded.LastChange
		}
	case p != nil:
		r.Policy = p.Name
		members = s.policyMembers(p)
		r.Shifted, r.Reason, r.LastChange = rebalanceStatus(p, rsp)
	default:
		r.Shifted = base.shifted(rsp)
	}
	placed := currentPlacement(base.clusters, rsp, members)
	for _, c := range clusterNames(base.clusters, rsp.Spec.Clusters, members) {
		row := RSPClusterRow{Cluster: c, Baseline: prefsPtr(base.clusters, c), Current: prefsPtr(rsp.Spec.Clusters, c)}
		if n, ok := placed[c]; ok {
			row.Replicas = &n
		}
		r.Clusters = append(r.Clusters, row)
	}
	return r
}

// baseline is the user's placement of an RSP.
type baseline struct {
	total    int32
	clusters map[string]fedschedv1a1.ClusterPreferences
	// recorded is fedfailover's state of the RSP; nil when it never touched it.
	recorded *contract.RebalanceState
}

// lastChange is when fedfailover last changed the RSP; zero when never.
func (b baseline) lastChange() time.Time {
	if b.recorded == nil || b.recorded.LastChange == nil {
		return time.Time{}
	}
	return b.recorded.LastChange.Time
}

// timers are a member's recorded timers; zero when none.
func (b baseline) timers(member string) (failingSince, roomSince time.Time) {
	if b.recorded == nil {
		return time.Time{}, time.Time{}
	}
	t := b.recorded.Members[member]
	if t.FailingSince != nil {
		failingSince = t.FailingSince.Time
	}
	if t.RoomSince != nil {
		roomSince = t.RoomSince.Time
	}
	return failingSince, roomSince
}

// baselineOf reads fedfailover's record of the user's spec, the RSP's
// RebalanceRecord (one of this RSP, not released); without one, the
// legacy annotation an older fedfailover wrote and the manager has not
// migrated yet. An RSP it never touched is its own baseline.
func (s *Snapshot) baselineOf(rsp *fedschedv1a1.ReplicaSchedulingPreference) (baseline, error) {
	if rec := s.rebalanceRecord(rsp); rec != nil {
		if rec.Spec.Released {
			return baseline{total: rsp.Spec.TotalReplicas, clusters: rsp.Spec.Clusters}, nil
		}
		m := contract.StateFromRecord(&rec.Spec)
		return baseline{total: m.Baseline.TotalReplicas, clusters: m.Baseline.Clusters, recorded: m}, nil
	}
	rec, err := contract.DecodeRebalanceState(rsp.Annotations)
	if err != nil || rec == nil {
		return baseline{total: rsp.Spec.TotalReplicas, clusters: rsp.Spec.Clusters}, err
	}
	return baseline{total: rec.Baseline.TotalReplicas, clusters: rec.Baseline.Clusters, recorded: rec}, nil
}

// rebalanceRecord is the RSP's RebalanceRecord, or nil (none, or one of an
// earlier RSP of the same name).
func (s *Snapshot) rebalanceRecord(rsp *fedschedv1a1.ReplicaSchedulingPreference) *v1alpha1.RebalanceRecord {
	for i := range s.Rebalances {
		r := &s.Rebalances[i]
		if r.Namespace == rsp.Namespace && r.Name == rsp.Name && (r.Spec.RSPUID == "" || r.Spec.RSPUID == string(rsp.UID)) {
			return r
		}
	}
	return nil
}

// shifted says whether the RSP's spec differs from its baseline.
func (b baseline) shifted(rsp *fedschedv1a1.ReplicaSchedulingPreference) bool {
	return !contract.Placement{TotalReplicas: b.total, Clusters: b.clusters}.Equal(
		contract.Placement{TotalReplicas: rsp.Spec.TotalReplicas, Clusters: rsp.Spec.Clusters})
}

func rebalanceStatus(p *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference) (bool, string, *metav1.Time) {
	for _, rb := range p.Status.Rebalances {
		if rb.Namespace == rsp.Namespace && rb.Name == rsp.Name {
			return rb.Shifted, rb.Reason, rb.LastChangeTime
		}
	}
	return false, "", nil
}

// currentPlacement is how kubefed spreads the RSP's current spec over the
// members, computed by the planner itself: with minInterval not elapsed and
// every member healthy, a plan keeps the current spec and reports its
// placement.
func currentPlacement(base map[string]fedschedv1a1.ClusterPreferences, rsp *fedschedv1a1.ReplicaSchedulingPreference, members []string) map[string]int64 {
	in := planner.Input{Baseline: base, TotalReplicas: rsp.Spec.TotalReplicas, Current: rsp.Spec.Clusters,
		CurrentTotalReplicas: rsp.Spec.TotalReplicas, Members: map[string]planner.Member{}}
	for _, m := range members {
		in.Members[m] = planner.Member{State: planner.Healthy}
	}
	in.LastChange = in.Now
	in.Spec.MinInterval = v1alpha1.Duration("876000h")
	return planner.Plan(in).Placement
}

func clusterNames(a, b map[string]fedschedv1a1.ClusterPreferences, members []string) []string {
	set := map[string]bool{}
	for _, m := range members {
		set[m] = true
	}
	for n := range maps.Keys(a) {
		set[n] = true
	}
	for n := range maps.Keys(b) {
		set[n] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func prefsPtr(m map[string]fedschedv1a1.ClusterPreferences, name string) *fedschedv1a1.ClusterPreferences {
	if p, ok := m[name]; ok {
		return &p
	}
	return nil
}

// FormatClusters prints an RSP's clusters sorted by name, each as
// "name{w=<weight>[,min=<min>][,max=<max>]}" (formatPrefs).
func FormatClusters(cs map[string]fedschedv1a1.ClusterPreferences) string {
	out := make([]string, 0, len(cs))
	for _, n := range slices.Sorted(maps.Keys(cs)) {
		p := cs[n]
		out = append(out, n+"{"+formatPrefs(&p)+"}")
	}
	return strings.Join(out, " ")
}

// formatPrefs is "w=<weight>[,min=<min>][,max=<max>]", or "-" when the
// cluster has no entry.
func formatPrefs(p *fedschedv1a1.ClusterPreferences) string {
	if p == nil {
		return "-"
	}
	s := fmt.Sprintf("w=%d", p.Weight)
	if p.MinReplicas != 0 {
		s += fmt.Sprintf(",min=%d", p.MinReplicas)
	}
	if p.MaxReplicas != nil {
		s += fmt.Sprintf(",max=%d", *p.MaxReplicas)
	}
	return s
}
