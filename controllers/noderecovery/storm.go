package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// Policy event reasons of the storm guard.
const (
	ReasonStormStarted = "StormStarted"
	ReasonStormEnded   = "StormEnded"
)

// errStaleGuard: the RecoveryGuard changed since it was read.
var errStaleGuard = errors.New("RecoveryGuard changed since it was read")

// readGuard returns the member's RecoveryGuard from the cache; a new,
// unsaved one (no storm) when there is none yet.
func (r *Reconciler) readGuard(ctx context.Context, cluster string) (*v1alpha1.RecoveryGuard, error) {
	g := &v1alpha1.RecoveryGuard{}
	err := r.host.Get(ctx, client.ObjectKey{Name: cluster}, g)
	if apierrors.IsNotFound(err) {
		return &v1alpha1.RecoveryGuard{ObjectMeta: metav1.ObjectMeta{Name: cluster}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading RecoveryGuard %s: %w", cluster, err)
	}
	return g, nil
}

func stormState(g *v1alpha1.RecoveryGuard) fencing.StormState {
	return fencing.StormState{Active: g.Status.StormActive, EndedAt: timeOf(g.Status.StormEndedAt)}
}

// writeGuard records the storm state, creating the guard on first use. The
// write is optimistic-locked: a pass that read the guard before our last
// write starts over, so a transition is recorded, and reported, once.
func (r *Reconciler) writeGuard(ctx context.Context, g *v1alpha1.RecoveryGuard, st fencing.StormState, msg string) error {
	if g.ResourceVersion == "" {
		if err := r.host.Create(ctx, g); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return errStaleGuard
			}
			return fmt.Errorf("creating RecoveryGuard %s: %w", g.Name, err)
		}
	}
	before := g.DeepCopy()
	g.Status = v1alpha1.RecoveryGuardStatus{StormActive: st.Active, StormEndedAt: metaTimePtr(st.EndedAt), Message: policystatus.Truncate(msg, 1024)}
	if err := r.host.Status().Patch(ctx, g, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return errStaleGuard
		}
		return fmt.Errorf("recording storm state on RecoveryGuard %s: %w", g.Name, err)
	}
	return nil
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
func (r *Reconciler) stormStep(ctx context.Context, v *memberView, now time.Time) (stormOutcome, error) {
	guard, err := r.readGuard(ctx, v.cluster)
	if err != nil {
		return stormOutcome{}, err
	}
	prev := stormState(guard)
	var out stormOutcome
	if v.policy != nil {
		nr := v.policy.Spec.NodeRecovery
		lost, notReady := 0, 0
		for _, n := range v.nodes {
			// Lost as decide counts it (lossOf): not Ready for notReadyFor
			// since fedfailover first saw it, or by evidence with a silent
			// kubelet Lease (host clock only). Every node counts, in the
			// policy's nodeSelector or not.
			in := nodeInput(v, n, now)
			in.Policy = nr
			byEvidence := false
			switch lossOf(in).By {
			case v1alpha1.NodeLossDetectionEvidence:
				lost, byEvidence = lost+1, true
			case v1alpha1.NodeLossDetectionNotReady:
				lost++
			}
			// The hold counts, besides the nodes not Ready, those whose
			// Machine shows them off (their Lease is read): nodes killed a
			// few seconds apart are found lost by evidence apart too, and
			// without the hold the first would be acted on alone.
			if _, suspect := v.leases[n.Name]; !nodecond.IsReady(n) || byEvidence || suspect {
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
			out.hold = fmt.Sprintf("%d of %d nodes not Ready (or shown off by their Machines), more than maxUnhealthy allows (%d): no new recovery while this could be a storm",
				notReady, len(v.nodes), allowed)
		}
	}
	metrics.StormActive.WithLabelValues(v.cluster).Set(boolGauge(out.Suspended))
	if out.State.Active == prev.Active && out.State.EndedAt.Equal(prev.EndedAt) {
		return out, nil
	}
	if err := r.writeGuard(ctx, guard, out.State, out.message); err != nil {
		return out, err
	}
	if v.policy != nil && prev.Active != out.State.Active {
		reason, typ, msg := ReasonStormStarted, corev1.EventTypeWarning, out.message
		if !out.State.Active {
			reason, typ, msg = ReasonStormEnded, corev1.EventTypeNormal, v.cluster+": storm over and cooldown passed; recovery resumed"
		}
		r.recorder.Eventf(v.policy, nil, typ, reason, "StormGuard", "%s", msg)
		r.store.decide(v.policy.Name, decision(now, v.cluster, "RecoveryGuard/"+v.cluster, "StormGuard", reason, msg, r.dryRun(v)))
	}
	return out, nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
