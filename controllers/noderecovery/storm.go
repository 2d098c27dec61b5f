package noderecovery

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// AnnotationStorm on the member's KubeFedCluster keeps the storm state
// (fencing.StormState) across restarts; absent means no storm.
const AnnotationStorm = markPrefix + "storm"

// Policy event reasons of the storm guard.
const (
	ReasonStormStarted = "StormStarted"
	ReasonStormEnded   = "StormEnded"
)

type stormMark struct {
	Active  bool       `json:"active"`
	EndedAt *time.Time `json:"endedAt,omitempty"`
}

func readStorm(a map[string]string) fencing.StormState {
	var m stormMark
	if s := a[AnnotationStorm]; s == "" || json.Unmarshal([]byte(s), &m) != nil {
		return fencing.StormState{}
	}
	st := fencing.StormState{Active: m.Active}
	if m.EndedAt != nil {
		st.EndedAt = *m.EndedAt
	}
	return st
}

func stormAnnotation(st fencing.StormState) *string {
	if !st.Active {
		return nil // removes the annotation
	}
	m := stormMark{Active: true}
	if !st.EndedAt.IsZero() {
		t := st.EndedAt.UTC()
		m.EndedAt = &t
	}
	b, _ := json.Marshal(m)
	s := string(b)
	return &s
}

// stormOutcome is the storm guard's decision plus a message for status.
type stormOutcome struct {
	fencing.StormDecision
	message string
	// hold is why no new recovery may start although no storm is declared.
	hold string
}

// stormStep counts the member's lost nodes, steps the storm state machine
// and persists its state when it changes.
func (r *Reconciler) stormStep(ctx context.Context, v *memberView) (stormOutcome, error) {
	prev := readStorm(v.kfc.Annotations)
	now := r.now()
	var out stormOutcome
	if v.policy != nil {
		nr := v.policy.Spec.NodeRecovery
		lost, notReady := 0, 0
		for _, n := range v.nodes {
			if l, _ := fencing.Lost(n, nr.NotReadyFor.Get(), now); l {
				lost++
			}
			if !nodecond.IsReady(n) {
				notReady++
			}
		}
		storming := fencing.Storm(lost, len(v.nodes), nr.MaxUnhealthy)
		out.StormDecision = fencing.NextStormState(prev, storming, now, nr.StormCooldown.Get())
		allowed := fencing.MaxLost(len(v.nodes), nr.MaxUnhealthy)
		switch {
		case storming:
			out.message = fmt.Sprintf("%s: %d of %d nodes lost, more than maxUnhealthy allows (%d); recovery suspended", v.cluster, lost, len(v.nodes), allowed)
		case out.Suspended:
			out.message = fmt.Sprintf("%s: storm over (%d of %d nodes lost); recovery resumes at %s after the cooldown", v.cluster, lost, len(v.nodes), out.ResumeAt.UTC().Format(time.RFC3339))
		}
		if !out.Suspended && fencing.Storm(notReady, len(v.nodes), nr.MaxUnhealthy) {
			out.hold = fmt.Sprintf("%d of %d nodes not Ready, more than maxUnhealthy allows (%d): no new recovery while this could be a storm", notReady, len(v.nodes), allowed)
		}
	}
	metrics.StormActive.WithLabelValues(v.cluster).Set(boolGauge(out.Suspended))
	if out.State.Active == prev.Active && out.State.EndedAt.Equal(prev.EndedAt) {
		return out, nil
	}
	patch := client.MergeFrom(v.kfc.DeepCopy())
	if v.kfc.Annotations == nil {
		v.kfc.Annotations = map[string]string{}
	}
	if a := stormAnnotation(out.State); a != nil {
		v.kfc.Annotations[AnnotationStorm] = *a
	} else {
		delete(v.kfc.Annotations, AnnotationStorm)
	}
	if err := r.host.Patch(ctx, v.kfc, patch); err != nil {
		return out, fmt.Errorf("recording storm state on KubeFedCluster: %w", err)
	}
	if v.policy != nil && prev.Active != out.State.Active {
		reason, typ, msg := ReasonStormStarted, corev1.EventTypeWarning, out.message
		if !out.State.Active {
			reason, typ, msg = ReasonStormEnded, corev1.EventTypeNormal, v.cluster+": storm over and cooldown passed; recovery resumed"
		}
		r.recorder.Eventf(v.policy, nil, typ, reason, "StormGuard", "%s", msg)
		r.store.decide(v.policy.Name, decision(now, v.cluster, "KubeFedCluster/"+v.cluster, "StormGuard", reason, msg, r.dryRun(v)))
	}
	return out, nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
