package cli

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// StatusView is what `kubectl failover status` shows (with -o, as the
// fields of a StatusReport).
type StatusView struct {
	Time       time.Time     `json:"time"`
	Members    []MemberRow   `json:"members"`
	Policies   []PolicyRow   `json:"policies"`
	RSPs       []RSPRow      `json:"replicaSchedulingPreferences"`
	Recoveries []RecoveryRow `json:"recoveries"`
	// FinishedRecoveries counts the closed NodeRecovery records kept on
	// the host (`kubectl get noderecoveries`, `explain node`).
	FinishedRecoveries int           `json:"finishedRecoveries"`
	Decisions          []DecisionRow `json:"recentDecisions"`
}

// MemberRow is one member cluster: kubefed's view merged with the most
// recent fedfailover probe of it in any policy's status.
type MemberRow struct {
	Name string `json:"name"`
	// KubefedReady is the KubeFedCluster's Ready condition status
	// (Missing when no KubeFedCluster exists).
	KubefedReady string `json:"kubefedReady"`
	// Connected is nil when no policy reports the member.
	Connected     *bool        `json:"connected,omitempty"`
	NodesReady    int32        `json:"nodesReady"`
	NodesTotal    int32        `json:"nodesTotal"`
	LostNodes     int32        `json:"lostNodes"`
	FencedNodes   int32        `json:"fencedNodes"`
	StormActive   bool         `json:"stormActive"`
	ServerVersion string       `json:"serverVersion,omitempty"`
	Reason        string       `json:"reason,omitempty"`
	Message       string       `json:"message,omitempty"`
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`
	Policies      []string     `json:"policies,omitempty"`
}

// PolicyRow is one FailoverPolicy.
type PolicyRow struct {
	Name string `json:"name"`
	// Mode is which features are on: Recovery(<method>), Rebalance, or both.
	Mode             string             `json:"mode"`
	DryRun           bool               `json:"dryRun"`
	Members          int                `json:"members"`
	ConnectedMembers int32              `json:"connectedMembers"`
	Conditions       []metav1.Condition `json:"conditions,omitempty"`
	// FailoverReadiness is N+1 readiness in short: "ok" (any one member's
	// failure would leave every replica room), "MEMBER: N short" (the
	// worst member's failure would leave N replicas of an RSP Pending),
	// "unknown", or "-" (not reported: rebalancing off, or nothing
	// published yet). From status.failoverReadiness, with the manager's
	// own function (planner.FailoverReadiness).
	FailoverReadiness string `json:"failoverReadiness"`
}

// DecisionRow is one recent decision in a policy's status.
type DecisionRow struct {
	Policy string `json:"policy"`
	v1alpha1.Decision
}

// BuildStatus turns a snapshot into the status view.
func BuildStatus(s *Snapshot) StatusView {
	rows := s.recoveryRows()
	v := StatusView{Time: s.Now, Members: memberRows(s, rows), RSPs: rspRows(s), Recoveries: rows, FinishedRecoveries: s.finishedRecords()}
	for i := range s.Policies {
		p := &s.Policies[i]
		v.Policies = append(v.Policies, policyRow(s, p))
		for _, d := range p.Status.RecentDecisions {
			v.Decisions = append(v.Decisions, DecisionRow{Policy: p.Name, Decision: d})
		}
	}
	sortDecisions(v.Decisions)
	return v
}

// sortDecisions orders newest first (then by policy, for stable output).
func sortDecisions(d []DecisionRow) {
	slices.SortStableFunc(d, func(a, b DecisionRow) int {
		if c := b.Time.Compare(a.Time.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Policy, b.Policy)
	})
}

// memberRows merges kubefed's members with the probes in policy status and
// counts each member's lost nodes from the recoveries going on.
func memberRows(s *Snapshot, recoveries []RecoveryRow) []MemberRow {
	rows := map[string]*MemberRow{}
	var names []string
	row := func(name string) *MemberRow {
		if r, ok := rows[name]; ok {
			return r
		}
		rows[name] = &MemberRow{Name: name, KubefedReady: s.kubefedReady(name)}
		names = append(names, name)
		return rows[name]
	}
	for _, n := range s.clusterNames() {
		row(n)
	}
	for i := range s.Policies {
		for _, m := range s.Policies[i].Status.Members {
			r := row(m.Name)
			r.Policies = append(r.Policies, s.Policies[i].Name)
			if r.Connected == nil || newer(m.LastProbeTime, r.LastProbeTime) {
				mergeMember(r, m)
			}
		}
	}
	slices.Sort(names)
	out := make([]MemberRow, 0, len(names))
	for _, n := range names {
		r := rows[n]
		c := s.memberCounts(recoveries, n)
		r.LostNodes, r.FencedNodes, r.StormActive = c.lost, c.fenced, c.suspended
		out = append(out, *r)
	}
	return out
}

func newer(a, b *metav1.Time) bool {
	return a != nil && (b == nil || a.After(b.Time))
}

// mergeMember takes the member's connection from a policy's member status.
func mergeMember(r *MemberRow, m v1alpha1.MemberStatus) {
	connected := m.Connected
	r.Connected = &connected
	r.NodesReady, r.NodesTotal = m.NodesReady, m.NodesTotal
	r.ServerVersion, r.Reason, r.Message, r.LastProbeTime = m.ServerVersion, m.Reason, m.Message, m.LastProbeTime
}

// counts summarises a member's recoveries going on: each is a lost node.
type counts struct {
	lost, fenced int32
	// suspended: recovery is suspended in the member (storm guard).
	suspended bool
}

func policyRow(s *Snapshot, p *v1alpha1.FailoverPolicy) PolicyRow {
	return PolicyRow{Name: p.Name, Mode: policyMode(p.Spec), DryRun: p.Spec.DryRun,
		Members: len(s.policyMembers(p)), ConnectedMembers: p.Status.ConnectedMembers, Conditions: p.Status.Conditions,
		FailoverReadiness: failoverReadiness(p)}
}

// failoverReadiness sums up the policy's published N+1 estimates: the
// worst member's shortfall (then the first RSP and member by name), else
// unknown while a figure is not known (or the FailoverReady condition
// says Unknown: a held RSP), else ok.
func failoverReadiness(p *v1alpha1.FailoverPolicy) string {
	cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionFailoverReady)
	if !p.Spec.Rebalance.On() || (cond == nil && len(p.Status.FailoverReadiness) == 0) {
		return "-"
	}
	var worst int64
	var worstMember string
	unknown := cond != nil && cond.Status == metav1.ConditionUnknown
	for _, st := range p.Status.FailoverReadiness {
		res := planner.FailoverReadiness(planner.ReadinessInputFromStatus(st))
		for _, m := range st.Members { // by name
			switch r := res[m.Name]; {
			case !r.Known:
				unknown = true
			case r.Shortfall > worst:
				worst, worstMember = r.Shortfall, m.Name
			}
		}
	}
	switch {
	case worst > 0:
		return fmt.Sprintf("%s: %d short", worstMember, worst)
	case unknown:
		return "unknown"
	}
	return "ok"
}

func policyMode(spec v1alpha1.FailoverPolicySpec) string {
	var parts []string
	if r := spec.NodeRecovery; r.On() {
		method := r.Method
		if method == "" {
			method = v1alpha1.RecoveryMethodAuto
		}
		parts = append(parts, "Recovery("+string(method)+")")
	}
	if r := spec.Rebalance; r.On() {
		parts = append(parts, "Rebalance")
	}
	if len(parts) == 0 {
		return "Off"
	}
	return strings.Join(parts, "+")
}

// conditionStatus is a condition's status, or "-" when absent.
func conditionStatus(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return string(c.Status)
	}
	return "-"
}
