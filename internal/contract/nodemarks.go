package contract

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// NodeMarks are the durable marks node recovery keeps on a member Node,
// written in the same patch as the action they record: besides the cluster
// itself they are its only state, so a restart resumes from them. The zero
// value is "no marks".
type NodeMarks struct {
	LostSince   time.Time
	FencedBy    string
	FencedAt    time.Time
	Action      v1alpha1.RecoveryMethod
	TaintedByUs bool
	Claims      []string
	RecoveredAt time.Time
}

// MaxClaims bounds the claims annotation (a Node's annotations share
// 256 KiB); Annotations keeps the first MaxClaims.
const MaxClaims = 200

// NodeMarkKeys are the keys of every node mark: they are removed together.
func NodeMarkKeys() []string {
	return []string{AnnotationLostSince, AnnotationFencedBy, AnnotationFencedAt, AnnotationAction,
		AnnotationTaintedBy, AnnotationClaims, AnnotationRecoveredAt}
}

// HasNodeMarks is true when some node mark is present, even empty or
// unreadable: the marks still need removing.
func HasNodeMarks(annotations map[string]string) bool {
	for _, k := range NodeMarkKeys() {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// Acted is true once a recovery action is recorded.
func (m NodeMarks) Acted() bool { return m.Action != "" }

// Annotations encodes the marks: one annotation per non-zero field, times
// in UTC RFC 3339 with nanoseconds.
func (m NodeMarks) Annotations() map[string]string {
	out := map[string]string{}
	setTime := func(k string, t time.Time) {
		if !t.IsZero() {
			out[k] = t.UTC().Format(time.RFC3339Nano)
		}
	}
	setTime(AnnotationLostSince, m.LostSince)
	setTime(AnnotationFencedAt, m.FencedAt)
	setTime(AnnotationRecoveredAt, m.RecoveredAt)
	if m.FencedBy != "" {
		out[AnnotationFencedBy] = m.FencedBy
	}
	if m.Action != "" {
		out[AnnotationAction] = string(m.Action)
	}
	if m.TaintedByUs {
		out[AnnotationTaintedBy] = "true"
	}
	if claims := m.Claims[:min(len(m.Claims), MaxClaims)]; len(claims) > 0 {
		out[AnnotationClaims] = strings.Join(claims, ",")
	}
	return out
}

// DecodeNodeMarks reads the marks from a Node's annotations. A mark that
// does not parse is left zero in the result and named in the error; the
// others are returned all the same.
func DecodeNodeMarks(annotations map[string]string) (NodeMarks, error) {
	var errs []error
	readTime := func(k string) time.Time {
		s, ok := annotations[k]
		if !ok {
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w", k, err))
			return time.Time{}
		}
		return t
	}
	m := NodeMarks{
		LostSince:   readTime(AnnotationLostSince),
		FencedBy:    annotations[AnnotationFencedBy],
		FencedAt:    readTime(AnnotationFencedAt),
		Action:      v1alpha1.RecoveryMethod(annotations[AnnotationAction]),
		RecoveredAt: readTime(AnnotationRecoveredAt),
	}
	switch v, ok := annotations[AnnotationTaintedBy]; {
	case v == "true":
		m.TaintedByUs = true
	case ok:
		errs = append(errs, fmt.Errorf("annotation %s: %q is not \"true\"", AnnotationTaintedBy, v))
	}
	if c := annotations[AnnotationClaims]; c != "" {
		m.Claims = strings.Split(c, ",")
	}
	return m, errors.Join(errs...)
}
