package cli

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// StatusView is what `kubectl failover status` shows (and prints as JSON
// or YAML with -o json|yaml).
type StatusView struct {
	Time       time.Time     `json:"time"`
	Members    []MemberRow   `json:"members"`
	Policies   []PolicyRow   `json:"policies"`
	RSPs       []RSPRow      `json:"replicaSchedulingPreferences"`
	Recoveries []RecoveryRow `json:"recoveries"`
	Decisions  []DecisionRow `json:"recentDecisions"`
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
}

// RecoveryRow is one node recovery in a policy's status.
type RecoveryRow struct {
	Policy string `json:"policy"`
	v1alpha1.NodeRecoveryStatus
}

// DecisionRow is one recent decision in a policy's status.
type DecisionRow struct {
	Policy string `json:"policy"`
	v1alpha1.Decision
}

// BuildStatus turns a snapshot into the status view.
func BuildStatus(s *Snapshot) StatusView {
	v := StatusView{Time: s.Now, Members: memberRows(s), RSPs: rspRows(s)}
	for i := range s.Policies {
		p := &s.Policies[i]
		v.Policies = append(v.Policies, policyRow(s, p))
		for _, r := range p.Status.Recoveries {
			v.Recoveries = append(v.Recoveries, RecoveryRow{Policy: p.Name, NodeRecoveryStatus: r})
		}
		for _, d := range p.Status.RecentDecisions {
			v.Decisions = append(v.Decisions, DecisionRow{Policy: p.Name, Decision: d})
		}
	}
	slices.SortStableFunc(v.Recoveries, func(a, b RecoveryRow) int {
		return strings.Compare(a.Cluster+"/"+a.Node, b.Cluster+"/"+b.Node)
	})
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

func memberRows(s *Snapshot) []MemberRow {
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
				mergeMember(r, &s.Policies[i], m)
			}
		}
	}
	slices.Sort(names)
	out := make([]MemberRow, 0, len(names))
	for _, n := range names {
		out = append(out, *rows[n])
	}
	return out
}

func newer(a, b *metav1.Time) bool {
	return a != nil && (b == nil || a.After(b.Time))
}

// mergeMember takes the member's connection from the policy's member
// status and its lost nodes from the policy's recoveries.
func mergeMember(r *MemberRow, p *v1alpha1.FailoverPolicy, m v1alpha1.MemberStatus) {
	connected := m.Connected
	r.Connected = &connected
	r.NodesReady, r.NodesTotal = m.NodesReady, m.NodesTotal
	r.ServerVersion, r.Reason, r.Message, r.LastProbeTime = m.ServerVersion, m.Reason, m.Message, m.LastProbeTime
	c := recoveryCounts(p, m.Name)
	r.LostNodes, r.FencedNodes, r.StormActive = c.lost, c.fenced, c.suspended
}

// counts summarises a member's entries in a policy's status.recoveries:
// each is a lost node (node recovery lists every one).
type counts struct {
	lost, fenced int32
	// suspended: recovery is suspended in the member (storm guard).
	suspended bool
}

func recoveryCounts(p *v1alpha1.FailoverPolicy, cluster string) counts {
	var c counts
	for _, r := range p.Status.Recoveries {
		if r.Cluster != cluster {
			continue
		}
		c.lost++
		if r.FencedAt != nil || r.Evidence != "" {
			c.fenced++
		}
		if r.Phase == v1alpha1.RecoveryPhaseSuspended {
			c.suspended = true
		}
	}
	return c
}

func policyRow(s *Snapshot, p *v1alpha1.FailoverPolicy) PolicyRow {
	return PolicyRow{Name: p.Name, Mode: policyMode(p.Spec), DryRun: p.Spec.DryRun,
		Members: len(s.policyMembers(p)), ConnectedMembers: p.Status.ConnectedMembers, Conditions: p.Status.Conditions}
}

func policyMode(spec v1alpha1.FailoverPolicySpec) string {
	var parts []string
	if r := spec.NodeRecovery; r != nil && r.Enabled {
		method := r.Method
		if method == "" {
			method = v1alpha1.RecoveryMethodAuto
		}
		parts = append(parts, "Recovery("+string(method)+")")
	}
	if r := spec.Rebalance; r != nil && r.Enabled {
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
