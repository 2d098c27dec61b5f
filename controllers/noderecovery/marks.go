package noderecovery

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// The durable marks on the member Node are contract.NodeMarks; this file
// holds what node recovery decides about them and the taint.

// OutOfServiceTaint is the KEP-2268 taint, with the value the Kubernetes
// documentation uses.
var OutOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// readMarks reads the node's marks. A garbled mark reads as unset, as it
// always has: the node is then judged by what is observed rather than
// stalled on a value nobody can act on.
func readMarks(n *corev1.Node) contract.NodeMarks {
	m, _ := contract.DecodeNodeMarks(n.Annotations)
	return m
}

// actionAnnotations are the marks written together with the action itself;
// tainted-by is set only with the taint method, so that cleanup removes
// only a taint fedfailover added.
func actionAnnotations(lostSince, now time.Time, evidence string, method v1alpha1.RecoveryMethod, claims []string) map[string]string {
	return contract.NodeMarks{LostSince: lostSince, FencedBy: evidence, FencedAt: now, Action: method,
		TaintedByUs: method == v1alpha1.RecoveryMethodOutOfServiceTaint, Claims: claims}.Annotations()
}

// withTaint returns the taints plus the out-of-service taint, once.
func withTaint(taints []corev1.Taint) []corev1.Taint {
	if slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService }) {
		return taints
	}
	return append(slices.Clone(taints), OutOfServiceTaint)
}

// withoutTaint drops only the exact taint fedfailover adds: an
// out-of-service taint with another value or effect was put by someone else.
func withoutTaint(taints []corev1.Taint) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool {
		return t.Key == OutOfServiceTaint.Key && t.Value == OutOfServiceTaint.Value && t.Effect == OutOfServiceTaint.Effect
	})
}
