package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// Policy event reasons of the storm guard.
const (
	ReasonStormStarted = "StormStarted"
	ReasonStormEnded   = "StormEnded"
)

// errStaleKubeFedCluster: the KubeFedCluster changed since it was read.
var errStaleKubeFedCluster = errors.New("KubeFedCluster changed since it was read")

// readStorm reads the storm state kept on the member's KubeFedCluster. An
// unreadable annotation counts as no storm, as it always has; it is
// rewritten at the next storm.
func readStorm(ctx context.Context, a map[string]string) fencing.StormState {
	s, err := contract.DecodeStorm(a)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Ignoring the storm state", "reason", err.Error())
	}
	return fencing.StormState{Active: s.Active, EndedAt: s.EndedAt}
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
	prev := readStorm(ctx, v.kfc.Annotations)
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
	// The KubeFedCluster comes from a cache: the optimistic lock makes a
	// pass that read it before our last write (or kubefed's) start over,
	// so a transition is recorded, and reported, once.
	patch := client.MergeFromWithOptions(v.kfc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if v.kfc.Annotations == nil {
		v.kfc.Annotations = map[string]string{}
	}
	if a, keep := contract.EncodeStorm(contract.Storm{Active: out.State.Active, EndedAt: out.State.EndedAt}); keep {
		v.kfc.Annotations[contract.AnnotationStorm] = a
	} else {
		delete(v.kfc.Annotations, contract.AnnotationStorm)
	}
	if err := r.host.Patch(ctx, v.kfc, patch); err != nil {
		if apierrors.IsConflict(err) {
			return out, errStaleKubeFedCluster
		}
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
