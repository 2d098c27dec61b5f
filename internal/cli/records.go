package cli

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// RecoveryRow is one node recovery going on: a member node's active
// NodeRecovery record, or, for a loss fedfailover has no record of (e.g.
// the pods of a deleted Node), its entry in a policy's status.recoveries.
type RecoveryRow struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	Policy  string `json:"policy,omitempty"`
	// Record is the NodeRecovery's name; empty for a policy status entry.
	Record   string                  `json:"record,omitempty"`
	Phase    v1alpha1.RecoveryPhase  `json:"phase"`
	Evidence string                  `json:"evidence,omitempty"`
	Method   v1alpha1.RecoveryMethod `json:"method,omitempty"`
	Machine  string                  `json:"machine,omitempty"`
	// AffectedPods counts the claims tracked (the in-scope pods on the node).
	AffectedPods int32 `json:"affectedPods"`
	// LostSeenAt is when fedfailover first saw the loss (the host's clock).
	LostSeenAt  *metav1.Time `json:"lostSeenAt,omitempty"`
	ActedAt     *metav1.Time `json:"actedAt,omitempty"`
	RecoveredAt *metav1.Time `json:"recoveredAt,omitempty"`
	DryRun      bool         `json:"dryRun,omitempty"`
	Migrated    bool         `json:"migrated,omitempty"`
	Message     string       `json:"message,omitempty"`
}

// active: the record is not closed.
func active(rec *v1alpha1.NodeRecovery) bool {
	return rec.Status.Phase != v1alpha1.RecoveryPhaseFinished
}

// recoveryRows lists the recoveries going on: every active record, then
// the policy status entries of nodes without one. The record wins over the
// policy's entry for the same node: it is what fedfailover resumes from.
func (s *Snapshot) recoveryRows() []RecoveryRow {
	var rows []RecoveryRow
	recorded := map[string]bool{}
	for i := range s.Records {
		rec := &s.Records[i]
		if active(rec) {
			rows = append(rows, recordRow(rec, s.policyEntry(rec.Spec.Cluster, rec.Spec.Node)))
			recorded[rec.Spec.Cluster+"/"+rec.Spec.Node] = true
		}
	}
	for i := range s.Policies {
		for _, e := range s.Policies[i].Status.Recoveries {
			if !recorded[e.Cluster+"/"+e.Node] {
				rows = append(rows, entryRow(s.Policies[i].Name, e))
			}
		}
	}
	slices.SortStableFunc(rows, func(a, b RecoveryRow) int {
		return strings.Compare(a.Cluster+"/"+a.Node, b.Cluster+"/"+b.Node)
	})
	return rows
}

// recordRow shows a record; the policy's entry fills in only what a record
// does not hold before the action (the pods on the node).
func recordRow(rec *v1alpha1.NodeRecovery, entry *v1alpha1.NodeRecoveryStatus) RecoveryRow {
	st := &rec.Status
	r := RecoveryRow{Cluster: rec.Spec.Cluster, Node: rec.Spec.Node, Policy: rec.Spec.Policy, Record: rec.Name,
		Phase: st.Phase, Evidence: st.Evidence, Method: st.Method, AffectedPods: int32(len(st.Claims)),
		LostSeenAt: st.ObservedAt, ActedAt: st.ActedAt, RecoveredAt: st.RecoveredAt,
		DryRun: st.DryRun, Migrated: st.Migrated, Message: st.Message}
	if m := rec.Spec.Machine; m != nil {
		r.Machine = m.Namespace + "/" + m.Name
	}
	if entry != nil && st.ActedAt == nil && len(st.Claims) == 0 {
		r.AffectedPods = entry.AffectedPods
	}
	return r
}

func entryRow(pol string, e v1alpha1.NodeRecoveryStatus) RecoveryRow {
	return RecoveryRow{Cluster: e.Cluster, Node: e.Node, Policy: pol, Phase: e.Phase, Evidence: e.Evidence, Method: e.Method,
		Machine: e.Machine, AffectedPods: e.AffectedPods, LostSeenAt: e.LostSince, ActedAt: e.FencedAt, Message: e.Message}
}

// policyEntry is the node's entry in a policy's status.recoveries, or nil.
func (s *Snapshot) policyEntry(cluster, node string) *v1alpha1.NodeRecoveryStatus {
	for i := range s.Policies {
		recs := s.Policies[i].Status.Recoveries
		for j := range recs {
			if recs[j].Cluster == cluster && recs[j].Node == node {
				return &recs[j]
			}
		}
	}
	return nil
}

// nodeRecords are the node's records: the active ones first (oldest first:
// with two, fedfailover continues the oldest), then the finished ones,
// newest first.
func (s *Snapshot) nodeRecords(cluster, node string) []v1alpha1.NodeRecovery {
	var out []v1alpha1.NodeRecovery
	for i := range s.Records {
		if s.Records[i].Spec.Cluster == cluster && s.Records[i].Spec.Node == node {
			out = append(out, s.Records[i])
		}
	}
	slices.SortStableFunc(out, func(a, b v1alpha1.NodeRecovery) int {
		if aa, ba := active(&a), active(&b); aa != ba {
			if aa {
				return -1
			}
			return 1
		}
		if active(&a) {
			return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
		}
		return b.CreationTimestamp.Compare(a.CreationTimestamp.Time)
	})
	return out
}

// finishedRecords counts the closed records kept on the host.
func (s *Snapshot) finishedRecords() int {
	n := 0
	for i := range s.Records {
		if !active(&s.Records[i]) {
			n++
		}
	}
	return n
}

// guard is the member's RecoveryGuard, or nil.
func (s *Snapshot) guard(cluster string) *v1alpha1.RecoveryGuard {
	for i := range s.Guards {
		if s.Guards[i].Name == cluster {
			return &s.Guards[i]
		}
	}
	return nil
}

// memberCounts summarises a member's recoveries going on: each is a lost
// node; the storm state is its RecoveryGuard's (or a suspended recovery,
// for a manager that reports one).
func (s *Snapshot) memberCounts(rows []RecoveryRow, cluster string) counts {
	var c counts
	for _, r := range rows {
		if r.Cluster != cluster {
			continue
		}
		c.lost++
		if r.ActedAt != nil || r.Evidence != "" {
			c.fenced++
		}
		if r.Phase == v1alpha1.RecoveryPhaseSuspended {
			c.suspended = true
		}
	}
	if g := s.guard(cluster); g != nil && g.Status.StormActive {
		c.suspended = true
	}
	return c
}

// hasRecords: some record is about the member (it may have left kubefed).
func (s *Snapshot) hasRecords(cluster string) bool {
	for i := range s.Records {
		if s.Records[i].Spec.Cluster == cluster {
			return true
		}
	}
	return false
}
