package cli

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// Scenario is a what-if: one member failed or full.
type Scenario struct {
	// Cluster is the member the scenario is about.
	Cluster string `json:"cluster"`
	// Full is true for "out of capacity" (Exhausted), false for "failed".
	Full bool `json:"full"`
}

func (sc Scenario) String() string {
	if sc.Full {
		return fmt.Sprintf("%s is full (worst case: none of its replicas can run there)", sc.Cluster)
	}
	return fmt.Sprintf("%s fails (disconnected or not Ready for clusterFailedAfter)", sc.Cluster)
}

// assumedRoom stands for "room unknown, assume enough" for healthy
// members: the CLI does not read members, so it cannot estimate capacity.
const assumedRoom = 1 << 20

// PlanView is the what-if preview of every managed RSP.
type PlanView struct {
	Scenario Scenario  `json:"scenario"`
	RSPs     []PlanRow `json:"replicaSchedulingPreferences"`
	// Unmanaged lists RSPs no policy rebalances (namespace/name).
	Unmanaged []string `json:"unmanaged,omitempty"`
	// Held lists RSPs left as they are because the policy that manages
	// them has a selector that cannot be parsed.
	Held []HeldRow `json:"held,omitempty"`
}

// HeldRow is an RSP the rebalance controller leaves as it is.
type HeldRow struct {
	RSP    string `json:"replicaSchedulingPreference"`
	Policy string `json:"policy"`
	Reason string `json:"reason"`
}

// PlanRow is the planner's answer for one RSP.
type PlanRow struct {
	Namespace     string           `json:"namespace"`
	Name          string           `json:"name"`
	Policy        string           `json:"policy"`
	Reason        string           `json:"reason"`
	Changed       bool             `json:"changed"`
	TotalReplicas int32            `json:"totalReplicas"`
	PlannedTotal  int32            `json:"plannedTotalReplicas"`
	Clusters      []PlanClusterRow `json:"clusters"`
	// RetryAt is when the planner would look again (e.g. minInterval).
	RetryAt *time.Time `json:"retryAt,omitempty"`
	// Shortfall (--fail only) is how many of the RSP's replicas the other
	// members have no room for if the member failed now: N+1 readiness,
	// from the room the manager last published in the policy's
	// status.failoverReadiness (planner.FailoverReadiness, as the manager
	// computes it). Nil when not known; ShortfallNote says why.
	Shortfall     *int64 `json:"shortfall,omitempty"`
	ShortfallNote string `json:"shortfallNote,omitempty"`
}

// PlanClusterRow is one member of a planned RSP.
type PlanClusterRow struct {
	Cluster  string                           `json:"cluster"`
	State    planner.MemberState              `json:"state"`
	Replicas int64                            `json:"replicas"`
	Planned  int64                            `json:"plannedReplicas"`
	Current  *fedschedv1a1.ClusterPreferences `json:"current,omitempty"`
	Written  *fedschedv1a1.ClusterPreferences `json:"planned,omitempty"`
}

// ErrUnknownCluster is returned for a scenario about a cluster that is not
// a KubeFedCluster.
var ErrUnknownCluster = errors.New("unknown member cluster")

// BuildPlan runs the planner for every managed RSP as if the scenario held
// now. Nothing is written anywhere.
func BuildPlan(s *Snapshot, sc Scenario) (PlanView, error) {
	if s.cluster(sc.Cluster) == nil {
		return PlanView{}, fmt.Errorf("%w %q (KubeFedClusters: %s)", ErrUnknownCluster, sc.Cluster, strings.Join(s.clusterNames(), ", "))
	}
	v := PlanView{Scenario: sc}
	for i := range s.RSPs {
		rsp := &s.RSPs[i]
		sel := s.rebalancePolicy(rsp)
		if sel.Held != nil {
			v.Held = append(v.Held, HeldRow{RSP: rsp.Namespace + "/" + rsp.Name, Policy: sel.Held.Policy.Name, Reason: sel.Held.Err.Error()})
			continue
		}
		if sel.Governing == nil {
			v.Unmanaged = append(v.Unmanaged, rsp.Namespace+"/"+rsp.Name)
			continue
		}
		row, err := planRSP(s, sel.Governing, rsp, sc)
		if err != nil {
			return PlanView{}, err
		}
		v.RSPs = append(v.RSPs, row)
	}
	return v, nil
}

func planRSP(s *Snapshot, p *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, sc Scenario) (PlanRow, error) {
	base, err := s.baselineOf(rsp)
	if err != nil {
		return PlanRow{}, fmt.Errorf("RSP %s/%s: %w", rsp.Namespace, rsp.Name, err)
	}
	members := s.policyMembers(p)
	current := currentPlacement(base.clusters, rsp, members)
	in := planner.Input{Baseline: base.clusters, TotalReplicas: base.total, Current: rsp.Spec.Clusters,
		CurrentTotalReplicas: rsp.Spec.TotalReplicas, Members: map[string]planner.Member{}, Now: s.Now, Spec: *p.Spec.Rebalance}
	in.LastChange = base.lastChange()
	for _, m := range members {
		in.Members[m] = s.memberInput(p, m, sc, current[m], base)
	}
	res := planner.Plan(in)
	row := PlanRow{Namespace: rsp.Namespace, Name: rsp.Name, Policy: p.Name, Reason: res.Reason, Changed: res.Changed,
		TotalReplicas: rsp.Spec.TotalReplicas, PlannedTotal: res.TotalReplicas}
	if !res.RequeueAt.IsZero() && !res.Changed {
		t := res.RequeueAt.UTC()
		row.RetryAt = &t
	}
	for _, m := range members {
		row.Clusters = append(row.Clusters, PlanClusterRow{Cluster: m, State: in.Members[m].State, Replicas: current[m],
			Planned: res.Placement[m], Current: prefsPtr(rsp.Spec.Clusters, m), Written: prefsPtr(res.Clusters, m)})
	}
	if !sc.Full {
		row.Shortfall, row.ShortfallNote = failoverShortfall(p, rsp, sc.Cluster)
	}
	return row, nil
}

// Why a shortfall is not known.
const (
	noteNotPublished = "not published: the manager has not assessed this RSP with this member (yet)"
	noteUnobserved   = "not known: the manager cannot read another member's room now"
)

// failoverShortfall is what the member's failure now would leave of the
// RSP without room, by the estimate the manager last published.
func failoverShortfall(p *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, member string) (*int64, string) {
	st := publishedReadiness(p, rsp)
	if st == nil || !slices.ContainsFunc(st.Members, func(m v1alpha1.MemberReadiness) bool { return m.Name == member }) {
		return nil, noteNotPublished
	}
	r := planner.FailoverReadiness(planner.ReadinessInputFromStatus(*st))[member]
	if !r.Known {
		return nil, noteUnobserved
	}
	return &r.Shortfall, ""
}

// publishedReadiness is the RSP's entry of the policy's
// status.failoverReadiness, or nil.
func publishedReadiness(p *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference) *v1alpha1.RSPReadiness {
	for i := range p.Status.FailoverReadiness {
		if st := &p.Status.FailoverReadiness[i]; st.Namespace == rsp.Namespace && st.Name == rsp.Name {
			return st
		}
	}
	return nil
}

// memberInput is the planner's view of a member under the scenario. The
// scenario's member is Failed, or Exhausted with no room; the others are
// Healthy with unknown (ample) room when kubefed and fedfailover see them
// healthy, else Failed once clusterFailedAfter has passed since fedfailover
// first saw them failing (unconfirmed, moving nothing, while kubefed reports
// them Ready), and failing (for the federation guard) before.
func (s *Snapshot) memberInput(p *v1alpha1.FailoverPolicy, name string, sc Scenario, running int64, base baseline) planner.Member {
	failingSince, roomSince := base.timers(name)
	switch {
	case name == sc.Cluster && sc.Full:
		return planner.Member{State: planner.Exhausted}
	case name == sc.Cluster:
		return planner.Member{State: planner.Failed}
	case !s.memberHealthy(p, name):
		if !failingSince.IsZero() && !s.Now.Before(failingSince.Add(p.Spec.Rebalance.ClusterFailedAfter.Get())) {
			// Disconnected while kubefed reports it Ready: the planner reads
			// it as unconfirmed and moves nothing off it.
			return planner.Member{State: planner.Failed, KubefedReady: s.kubefedReady(name) == "True"}
		}
		// Not failed yet: the federation guard counts it as failing.
		return planner.Member{State: planner.Healthy, Failing: true}
	}
	return planner.Member{State: planner.Healthy, Running: running, Fits: assumedRoom, RoomSince: roomSince}
}

// memberHealthy: Ready in kubefed and not reported disconnected by the policy.
func (s *Snapshot) memberHealthy(p *v1alpha1.FailoverPolicy, name string) bool {
	if s.kubefedReady(name) != "True" {
		return false
	}
	i := slices.IndexFunc(p.Status.Members, func(m v1alpha1.MemberStatus) bool { return m.Name == name })
	return i < 0 || p.Status.Members[i].Connected
}
