package noderecovery

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Durable marks on the member Node. They are the only state node recovery
// keeps besides the cluster itself, so a restart at any point resumes from
// them. They are written in the same patch as the action they record.
const (
	markPrefix = "failover.fedfailover.io/"
	// AnnotationLostSince is when the node stopped being Ready (RFC 3339).
	AnnotationLostSince = markPrefix + "lost-since"
	// AnnotationFencedBy is the fencing evidence the action relied on.
	AnnotationFencedBy = markPrefix + "fenced-by"
	// AnnotationFencedAt is when the action was taken (RFC 3339).
	AnnotationFencedAt = markPrefix + "fenced-at"
	// AnnotationAction is the recovery method applied.
	AnnotationAction = markPrefix + "action"
	// AnnotationTaintedBy is "true" when fedfailover added the out-of-service
	// taint: only then does it remove it.
	AnnotationTaintedBy = markPrefix + "tainted-by-fedfailover"
	// AnnotationClaims lists the namespace/claim of the in-scope pods that
	// were on the node when it was fenced: their replacements are tracked.
	AnnotationClaims = markPrefix + "claims"
	// AnnotationRecoveredAt is when every tracked claim ran elsewhere again.
	AnnotationRecoveredAt = markPrefix + "recovered-at"
)

// allMarks are removed together when the node comes back.
var allMarks = []string{AnnotationLostSince, AnnotationFencedBy, AnnotationFencedAt, AnnotationAction,
	AnnotationTaintedBy, AnnotationClaims, AnnotationRecoveredAt}

// maxTrackedClaims bounds the claims annotation (annotations share 256 KiB).
const maxTrackedClaims = 200

// OutOfServiceTaint is the KEP-2268 taint, with the value the Kubernetes
// documentation uses.
var OutOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// marks is the parsed form of the annotations.
type marks struct {
	LostSince   time.Time
	FencedBy    string
	FencedAt    time.Time
	Action      v1alpha1.RecoveryMethod
	TaintedByUs bool
	Claims      []string
	RecoveredAt time.Time
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func readMarks(n *corev1.Node) marks {
	a := n.Annotations
	m := marks{
		LostSince:   parseTime(a[AnnotationLostSince]),
		FencedBy:    a[AnnotationFencedBy],
		FencedAt:    parseTime(a[AnnotationFencedAt]),
		Action:      v1alpha1.RecoveryMethod(a[AnnotationAction]),
		TaintedByUs: a[AnnotationTaintedBy] == "true",
		RecoveredAt: parseTime(a[AnnotationRecoveredAt]),
	}
	if c := a[AnnotationClaims]; c != "" {
		m.Claims = strings.Split(c, ",")
	}
	return m
}

// acted is true once a recovery action was taken for the current loss.
func (m marks) acted() bool { return m.Action != "" }

// any is true when some mark of ours is on the node.
func hasAnyMark(n *corev1.Node) bool {
	for _, k := range allMarks {
		if _, ok := n.Annotations[k]; ok {
			return true
		}
	}
	return false
}

// actionAnnotations are written together with the action itself.
func actionAnnotations(lostSince, now time.Time, evidence string, method v1alpha1.RecoveryMethod, claims []string) map[string]string {
	out := map[string]string{
		AnnotationFencedBy: evidence,
		AnnotationFencedAt: formatTime(now),
		AnnotationAction:   string(method),
	}
	if !lostSince.IsZero() {
		out[AnnotationLostSince] = formatTime(lostSince)
	}
	if len(claims) > maxTrackedClaims {
		claims = claims[:maxTrackedClaims]
	}
	if len(claims) > 0 {
		out[AnnotationClaims] = strings.Join(claims, ",")
	}
	if method == v1alpha1.RecoveryMethodOutOfServiceTaint {
		out[AnnotationTaintedBy] = "true"
	}
	return out
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
