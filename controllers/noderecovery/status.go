package noderecovery

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// StatusFieldOwner is the server-side apply field manager of the node
// recovery fields of FailoverPolicy status: recoveries, recentDecisions and
// the StormActive and FencingBlocked conditions. The member controller
// applies its own fields with another manager, so neither overwrites the
// other.
const StatusFieldOwner = "fedfailover-noderecovery"

const maxRecoveriesInStatus = 256

// statusWriter writes the node recovery part of each policy's status from
// the member passes' reports.
func statusWriter(s *store, resync time.Duration) *policystatus.Writer[string, memberReport] {
	return &policystatus.Writer[string, memberReport]{Name: "failoverpolicy-noderecovery", FieldOwner: StatusFieldOwner,
		Store: s.reports, Build: desiredStatus, Resync: resync}
}

// desiredStatus builds only the fields this controller owns.
func desiredStatus(pol *v1alpha1.FailoverPolicy, reps map[string]memberReport) v1alpha1.FailoverPolicyStatus {
	clusters := make([]string, 0, len(reps))
	for c := range reps {
		clusters = append(clusters, c)
	}
	slices.Sort(clusters)
	var recs []v1alpha1.NodeRecoveryStatus
	var storms, blocked, left, remediating []string
	for _, c := range clusters {
		rep := reps[c]
		recs = append(recs, rep.Recoveries...)
		if rep.Storm {
			storms = append(storms, rep.StormMessage)
		}
		left = append(left, rep.TaintsLeft...)
		for _, rec := range rep.Recoveries {
			switch rec.Phase {
			case v1alpha1.RecoveryPhaseBlocked:
				blocked = append(blocked, fmt.Sprintf("%s/%s: %s", rec.Cluster, rec.Node, rec.Message))
			case v1alpha1.RecoveryPhaseRemediating:
				remediating = append(remediating, fmt.Sprintf("%s/%s: %s", rec.Cluster, rec.Node, rec.Message))
			}
		}
	}
	if len(recs) > maxRecoveriesInStatus {
		recs = recs[:maxRecoveriesInStatus]
	}
	storm := policystatus.Condition(pol, v1alpha1.ConditionStormActive, metav1.ConditionFalse, v1alpha1.ReasonNoStorm,
		"no member has more lost nodes than maxUnhealthy")
	if len(storms) > 0 {
		storm = policystatus.Condition(pol, v1alpha1.ConditionStormActive, metav1.ConditionTrue, v1alpha1.ReasonStormActive,
			strings.Join(storms, "; "))
	}
	block := policystatus.Condition(pol, v1alpha1.ConditionFencingBlocked, metav1.ConditionFalse, v1alpha1.ReasonNoBlockedNodes,
		"no lost node is waiting for fencing evidence")
	if len(blocked) > 0 {
		block = policystatus.Condition(pol, v1alpha1.ConditionFencingBlocked, metav1.ConditionTrue, v1alpha1.ReasonNoFencingEvidence,
			strings.Join(blocked, "; "))
	}
	rem := policystatus.Condition(pol, v1alpha1.ConditionRemediating, metav1.ConditionFalse, v1alpha1.ReasonNoRemediationPending,
		"no lost node waits for a remediation")
	if len(remediating) > 0 {
		rem = policystatus.Condition(pol, v1alpha1.ConditionRemediating, metav1.ConditionTrue, v1alpha1.ReasonRemediationPending,
			policystatus.Truncate(strings.Join(remediating, "; "), 4096))
	}
	taints := policystatus.Condition(pol, v1alpha1.ConditionTaintRemovalPending, metav1.ConditionFalse, v1alpha1.ReasonNoTaintLeft,
		"no taint of fedfailover's waits for removal")
	if len(left) > 0 {
		taints = policystatus.Condition(pol, v1alpha1.ConditionTaintRemovalPending, metav1.ConditionTrue, v1alpha1.ReasonTaintStays,
			policystatus.Truncate(strings.Join(left, "; "), 4096))
	}
	return v1alpha1.FailoverPolicyStatus{Recoveries: recs, Conditions: policystatus.Conditions(pol, storm, block, rem, taints)}
}
