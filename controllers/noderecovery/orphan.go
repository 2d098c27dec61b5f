package noderecovery

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
)

const transitionOrphan = "Orphan"

// orphanNodes are node names that pods or VolumeAttachments still refer to
// but that have no Node object any more, sorted.
func orphanNodes(v *memberView) []string {
	present := map[string]bool{}
	for _, n := range v.nodes {
		present[n.Name] = true
	}
	var out []string
	for name := range v.pods {
		if !present[name] {
			out = append(out, name)
		}
	}
	for name := range v.vas {
		if name != "" && !present[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// reconcileOrphans handles, in name order, the deleted Nodes whose pods or
// attachments remain.
func (r *Reconciler) reconcileOrphans(ctx context.Context, v *memberView) []outcome {
	var out []outcome
	for _, name := range orphanNodes(v) {
		st, after, err := r.reconcileOrphan(ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("node", name)), v, name)
		if err != nil {
			err = fmt.Errorf("deleted node %s: %w", name, err)
		}
		out = append(out, outcome{status: st, after: after, err: err})
	}
	return out
}

// reconcileOrphan handles a deleted Node whose pods or attachments remain.
// Without a Node there is nothing to taint: with
// fencing evidence from its Machine (infrastructure gone), its pods and
// attachments are force-deleted, which is idempotent; without, Kubernetes'
// pod GC and attach-detach controller are left to it.
func (r *Reconciler) reconcileOrphan(ctx context.Context, v *memberView, name string) (*v1alpha1.NodeRecoveryStatus, time.Duration, error) {
	m := v.machines[name]
	if v.policy == nil || m == nil {
		return nil, 0, nil
	}
	gone := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	st := &v1alpha1.NodeRecoveryStatus{Cluster: v.cluster, Node: name, Machine: m.Namespace + "/" + m.Name,
		Method: v1alpha1.RecoveryMethodForceDelete, AffectedPods: int32(len(inScope(v, name)))}
	switch {
	case v.suspended:
		st.Phase, st.Message = v1alpha1.RecoveryPhaseSuspended, "Node deleted; recovery suspended in this member (storm)"
		return st, 0, nil
	case v.hold != "":
		st.Phase, st.Message = v1alpha1.RecoveryPhaseSuspended, "Node deleted; "+v.hold
		return st, 0, nil
	}
	res := fencing.Verdict(fencing.Input{Machine: m, Policy: v.policy.Spec.NodeRecovery.Fencing, Now: r.now()})
	if why := fencing.MachineOfDeletedNode(name, recordedMachine(v, name), m); why != "" {
		// Names are reused: the Machine must be the one tied to this node.
		res = fencing.Result{Reason: fencing.ReasonNoFencingEvidence, Missing: []string{why}}
	}
	if !res.Fenced {
		st.Phase, st.Message = v1alpha1.RecoveryPhaseBlocked, "Node deleted; "+res.Message()
		if r.store.changed(v.cluster, name, transitionBlocked) {
			r.report(ctx, v, gone, corev1.EventTypeWarning, ReasonFencingBlocked, "Block", st.Message)
		}
		return st, 0, nil
	}
	st.Phase, st.Evidence, st.Message = v1alpha1.RecoveryPhaseRecovering, res.Reason, "Node deleted; "+res.Message()
	if r.paused(v) {
		st.Message = "policy paused, nothing written; " + st.Message
		return st, 0, nil
	}
	if r.dryRun(v) {
		if r.store.changed(v.cluster, name, transitionDryRun) {
			r.report(ctx, v, gone, corev1.EventTypeNormal, ReasonWouldRecover, string(v1alpha1.RecoveryMethodForceDelete),
				"dry run: would force-delete the pods and attachments of the deleted node; "+res.Message())
		}
		return st, 0, nil
	}
	if r.store.changed(v.cluster, name, transitionOrphan) {
		r.report(ctx, v, gone, corev1.EventTypeNormal, ReasonForceDeleteStarted, string(v1alpha1.RecoveryMethodForceDelete),
			fmt.Sprintf("Node deleted; force-deleting its %d pods and its attachments; %s", st.AffectedPods, res.Message()))
	}
	p := &plan{Rec: recorded{Action: v1alpha1.RecoveryMethodForceDelete}}
	after, err := r.forceDelete(ctx, v, gone, p)
	if err != nil {
		return nil, 0, err
	}
	if p.Message != "" {
		st.Message += "; " + p.Message
	}
	return st, after, nil
}

// recordedMachine is what the active record of the deleted node says about
// its Machine: the record of this loss, kept active while the deleted
// node's pods or attachments remain (closeDeleted). Finished records are of
// earlier losses, maybe of another Node and Machine under the same names:
// they say nothing about this one.
func recordedMachine(v *memberView, node string) fencing.RecordedMachine {
	rec := v.records[node]
	if rec == nil {
		return fencing.RecordedMachine{}
	}
	out := fencing.RecordedMachine{ProviderID: rec.Spec.ProviderID}
	if rec.Spec.Machine != nil {
		out.UID = rec.Spec.Machine.UID
	}
	return out
}
