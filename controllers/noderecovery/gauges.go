package noderecovery

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// observeMember publishes what one pass saw in a member for alerting: its
// lost nodes by phase (a node Blocked for long needs a human) and the Ready
// nodes that still carry our out-of-service taint (removing it is part of
// every pass, so a lasting count means the removal keeps failing).
func observeMember(cluster string, nodes []*corev1.Node, records map[string]*v1alpha1.NodeRecovery, recs []v1alpha1.NodeRecoveryStatus) {
	counts := phaseCounts(recs)
	for _, ph := range v1alpha1.RecoveryPhases {
		metrics.LostNodes.WithLabelValues(cluster, string(ph)).Set(float64(counts[ph]))
	}
	metrics.OutOfServiceReadyNodes.WithLabelValues(cluster).Set(float64(readyWithOurTaint(nodes, records)))
}

func phaseCounts(recs []v1alpha1.NodeRecoveryStatus) map[v1alpha1.RecoveryPhase]int {
	out := map[v1alpha1.RecoveryPhase]int{}
	for _, r := range recs {
		out[r.Phase]++
	}
	return out
}

// readyWithOurTaint counts Ready nodes with the exact taint fedfailover adds
// whose record says it added it (a taint someone else put is theirs).
func readyWithOurTaint(nodes []*corev1.Node, records map[string]*v1alpha1.NodeRecovery) int {
	n := 0
	for _, node := range nodes {
		rec := records[node.Name]
		if nodecond.IsReady(node) && rec != nil && rec.Spec.NodeUID == string(node.UID) && recordedOf(rec).OwnsTaint &&
			len(withoutTaint(node.Spec.Taints)) != len(node.Spec.Taints) {
			n++
		}
	}
	return n
}
