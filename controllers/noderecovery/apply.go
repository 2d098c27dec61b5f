package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// Event reasons and decision actions.
const (
	ReasonFencingBlocked        = "FencingBlocked"
	ReasonRecoverySuspended     = "RecoverySuspended"
	ReasonOutOfServiceTainted   = "OutOfServiceTaintApplied"
	ReasonForceDeleteStarted    = "ForceDeleteStarted"
	ReasonMachineDeletionAsked  = "MachineDeletionRequested"
	ReasonRecovered             = "NodeRecovered"
	ReasonNodeReturned          = "NodeReturned"
	ReasonWouldRecover          = "DryRunWouldRecover"
	ReasonWouldDeleteMachine    = "DryRunWouldDeleteMachine"
	forceDeleteRecheck          = time.Second
	transitionBlocked           = "Blocked"
	transitionSuspended         = "Suspended"
	transitionDryRun            = "DryRun"
	transitionDryRunMachineGone = "DryRunMachine"
)

func (r *Reconciler) dryRun(v *memberView) bool { return v.policy != nil && v.policy.Spec.DryRun }

// paused: the governing policy stops every write to the member at once.
func (r *Reconciler) paused(v *memberView) bool { return v.policy != nil && v.policy.Spec.Paused }

// apply carries out the plan's step; it may advance p (phase, message).
func (r *Reconciler) apply(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	key := ""
	defer func() {
		r.store.transition(v.cluster, n.Name, key)
		if key != transitionBlocked {
			r.store.transition(v.cluster, n.Name+"/machine", "")
		}
	}()
	if r.paused(v) {
		if p.Step != stepNone {
			p.Message = fmt.Sprintf("policy paused, nothing written (next step: %s); %s", p.Step, p.Message)
		}
		return 0, nil
	}
	switch {
	case p.Step == stepCleanup:
		return r.cleanup(ctx, v, n, p)
	case p.Rec.Acted():
		if p.Rec.ActedAt.IsZero() && (p.Step == stepTaint || p.Step == stepForceDelete) {
			return r.act(ctx, v, n, p)
		}
		if p.Step == stepForceDelete {
			after, err := r.forceDelete(ctx, v, n, p, false)
			if err != nil || after > 0 {
				return after, err
			}
		}
		return 0, r.track(ctx, v, n, p)
	case p.Phase == v1alpha1.RecoveryPhaseSuspended:
		key = transitionSuspended
		if r.store.changed(v.cluster, n.Name, key) {
			r.report(ctx, v, n, corev1.EventTypeWarning, ReasonRecoverySuspended, "Suspend", p.Message)
		}
	case p.Phase == v1alpha1.RecoveryPhaseBlocked:
		key = transitionBlocked
		if r.store.changed(v.cluster, n.Name, key) {
			metrics.FencingBlocked.WithLabelValues(p.Verdict.Reason).Inc()
			r.report(ctx, v, n, corev1.EventTypeWarning, ReasonFencingBlocked, "Block", p.Message)
		}
		if p.Step == stepDeleteMachine {
			return 0, r.deleteMachine(ctx, v, n, p)
		}
	case p.Step == stepTaint || p.Step == stepForceDelete:
		if r.dryRun(v) {
			key = transitionDryRun
			if r.store.changed(v.cluster, n.Name, key) {
				metrics.NodeRecoveries.WithLabelValues(v.cluster, string(p.Method), metrics.NodeRecoveryResultDryRun).Inc()
				r.report(ctx, v, n, corev1.EventTypeNormal, ReasonWouldRecover, string(p.Method),
					fmt.Sprintf("dry run: would apply %s; %s", p.Method, p.Message))
			}
			return 0, nil
		}
		return r.act(ctx, v, n, p)
	}
	return 0, nil
}

// act records the intent, then acts, then records the action: a restart
// between any two steps finds the intent and (with a fencing verdict
// computed again) completes the action, or drops it. The taint patch is
// optimistic-locked on the Node just read live.
func (r *Reconciler) act(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	live, err := r.confirmFenced(ctx, v, n.Name, n, p.sighting)
	if err != nil {
		return r.notProven(ctx, v, n, p, err)
	}
	rec := p.record
	if rec == nil {
		return 0, fmt.Errorf("no NodeRecovery record for node %s", n.Name)
	}
	if !p.Rec.Acted() {
		// Whether an out-of-service taint is there before us decides, for
		// good, whether fedfailover may ever remove it.
		now, claims := r.now(), claimsOf(inScope(v, n.Name))
		if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
			st.Phase, st.Method, st.Evidence, st.Claims = v1alpha1.RecoveryPhaseActing, p.Method, p.Verdict.Reason, claims
			st.TaintPreexisting, st.IntentAt = hasOutOfServiceTaint(live.Spec.Taints), metaTimePtr(now)
		}); err != nil {
			return 0, fmt.Errorf("recording the intent: %w", err)
		}
		p.Rec = recordedOf(rec)
	}
	if p.Method == v1alpha1.RecoveryMethodOutOfServiceTaint && !hasOutOfServiceTaint(live.Spec.Taints) {
		upd := live.DeepCopy()
		upd.Spec.Taints = withTaint(upd.Spec.Taints)
		if err := v.client.Patch(ctx, upd, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil {
			return 0, fmt.Errorf("applying the out-of-service taint: %w", err)
		}
	}
	now := r.now()
	if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.Phase, st.ActedAt = v1alpha1.RecoveryPhaseRecovering, metaTimePtr(now)
	}); err != nil {
		return 0, fmt.Errorf("recording the action: %w", err)
	}
	p.Rec = recordedOf(rec)
	p.Phase = v1alpha1.RecoveryPhaseRecovering
	reason := ReasonOutOfServiceTainted
	if p.Method == v1alpha1.RecoveryMethodForceDelete {
		reason = ReasonForceDeleteStarted
	}
	r.report(ctx, v, n, corev1.EventTypeNormal, reason, string(p.Method),
		fmt.Sprintf("%s (%d claims tracked); %s", p.Method, len(p.Rec.Claims), p.Verdict.Message()))
	return r.forceDelete(ctx, v, n, p, true)
}

// forceDelete deletes the node's in-scope pods with grace period 0 and, for
// the ForceDelete method, once they are gone, the node's VolumeAttachments
// that no remaining pod uses. Idempotent: every pass deletes what is still
// there. Safe only because the node is proven fenced in this pass.
// proven says the caller confirmed the fence live in this pass already
// (act, right before its taint patch): no second re-read.
func (r *Reconciler) forceDelete(ctx context.Context, v *memberView, n *corev1.Node, p *plan, proven bool) (time.Duration, error) {
	log := ctrl.LoggerFrom(ctx)
	pods := slices.DeleteFunc(inScope(v, n.Name), ownedByDaemonSet)
	if !proven && (len(pods) > 0 || len(v.vas[n.Name]) > 0) {
		var cached *corev1.Node
		if n.UID != "" {
			cached = n
		}
		if _, err := r.confirmFenced(ctx, v, n.Name, cached, p.sighting); err != nil {
			return r.notProven(ctx, v, n, p, err)
		}
	}
	// A pod already deleting that a finalizer holds cannot go any faster:
	// deleting it again every pass is only churn. Its containers are dead
	// with the fenced node, so the attachment step below may go on.
	pods, held := splitHeld(pods)
	for _, pod := range pods {
		if err := r.stillOrphan(ctx, v, n); err != nil {
			return r.notProven(ctx, v, n, p, err)
		}
		// The pod exactly as read: a kubelet that has started it since (a
		// replacement registered under the same name) changed it, and the
		// delete is refused; the next pass decides on what it sees then.
		uid, rv := pod.UID, pod.ResourceVersion
		err := v.client.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, fmt.Errorf("force-deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		log.Info("Force-deleted pod of fenced node", "pod", client.ObjectKeyFromObject(pod))
	}
	if len(pods) > 0 {
		p.Message = fmt.Sprintf("force-deleted %d pods of the fenced node", len(pods))
		return forceDeleteRecheck, nil
	}
	after := time.Duration(0)
	if len(held) > 0 {
		p.Message = "waiting for " + describeHeld(held)
		after = finalizerRecheck
	}
	if p.Rec.Action != v1alpha1.RecoveryMethodForceDelete {
		// With the taint, the attach-detach controller detaches at once.
		return after, nil
	}
	keep, err := r.volumesInUse(ctx, v, n.Name)
	if err != nil {
		return 0, err
	}
	for _, va := range v.vas[n.Name] {
		pv := attachmentPV(va)
		if va.DeletionTimestamp != nil || keep[pv] {
			continue
		}
		if err := r.stillOrphan(ctx, v, n); err != nil {
			return r.notProven(ctx, v, n, p, err)
		}
		uid, rv := va.UID, va.ResourceVersion
		if err := v.client.Delete(ctx, va, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, fmt.Errorf("deleting VolumeAttachment %s: %w", va.Name, err)
		}
		log.Info("Deleted VolumeAttachment of fenced node", "volumeAttachment", va.Name, "persistentVolume", pv)
	}
	return after, nil
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	// A DaemonSet recreates its pod on the same node: deleting it is churn.
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
}

func attachmentPV(va *storagev1.VolumeAttachment) string {
	if va.Spec.Source.PersistentVolumeName == nil {
		return ""
	}
	return *va.Spec.Source.PersistentVolumeName
}

// volumesInUse returns the PVs of the pods still on the node (out of scope):
// their attachments stay.
func (r *Reconciler) volumesInUse(ctx context.Context, v *memberView, node string) (map[string]bool, error) {
	out := map[string]bool{}
	// In-scope pods already force-deleted (held by a finalizer) no longer
	// use their volumes: the node is fenced.
	using := slices.DeleteFunc(slices.Clone(v.pods[node]), func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil && v.scope.matches(p)
	})
	for _, claim := range claimsOf(using) {
		pv, err := claimVolume(ctx, v.client, claim)
		if err != nil {
			return nil, err
		}
		if pv != "" {
			out[pv] = true
		}
	}
	return out, nil
}

// claimVolume returns the PV bound to namespace/claim ("" if none or gone).
func claimVolume(ctx context.Context, c client.Reader, claim string) (string, error) {
	ns, name, _ := cut(claim)
	pvc := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("getting claim %s: %w", claim, err)
	}
	return pvc.Spec.VolumeName, nil
}

// track checks the replacements of a node acted on and records, once, that
// they run elsewhere.
func (r *Reconciler) track(ctx context.Context, v *memberView, n *corev1.Node, p *plan) error {
	if !p.Rec.Recovered.IsZero() || p.record == nil {
		return nil
	}
	done, why, err := r.replaced(ctx, v, n, p.Rec)
	if err != nil {
		return err
	}
	if !done {
		p.Message += ": " + why
		return nil
	}
	now := r.now()
	if err := r.updateRecord(ctx, p.record, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.Phase, st.RecoveredAt = v1alpha1.RecoveryPhaseRecovered, metaTimePtr(now)
	}); err != nil {
		return fmt.Errorf("recording the recovery: %w", err)
	}
	method := string(p.Rec.Action)
	metrics.NodeRecoveries.WithLabelValues(v.cluster, method, metrics.NodeRecoveryResultSucceeded).Inc()
	if !p.Rec.LossAt.IsZero() {
		metrics.NodeRecoverySeconds.WithLabelValues(v.cluster, metrics.RecoveryFromLost).Observe(now.Sub(p.Rec.LossAt).Seconds())
	}
	if !p.Rec.ActedAt.IsZero() {
		metrics.NodeRecoverySeconds.WithLabelValues(v.cluster, metrics.RecoveryFromFenced).Observe(now.Sub(p.Rec.ActedAt).Seconds())
	}
	p.Rec.Recovered = now
	p.Phase = v1alpha1.RecoveryPhaseRecovered
	p.Message = fmt.Sprintf("%d claims run on other nodes, %s after fencing", len(p.Rec.Claims), now.Sub(p.Rec.ActedAt).Round(100*time.Millisecond))
	r.report(ctx, v, n, corev1.EventTypeNormal, ReasonRecovered, "Recover", p.Message)
	return nil
}

// replaced is true when every tracked claim is used by a Ready pod on another
// node and its volume is attached there and nowhere else; with no claims,
// when no in-scope pod is left on the node.
func (r *Reconciler) replaced(ctx context.Context, v *memberView, n *corev1.Node, m recorded) (bool, string, error) {
	if len(m.Claims) == 0 {
		if left := len(slices.DeleteFunc(inScope(v, n.Name), ownedByDaemonSet)); left > 0 {
			return false, fmt.Sprintf("%d pods still on the node", left), nil
		}
		return true, "", nil
	}
	byPV := map[string][]*storagev1.VolumeAttachment{}
	for _, list := range v.vas {
		for _, va := range list {
			byPV[attachmentPV(va)] = append(byPV[attachmentPV(va)], va)
		}
	}
	for _, claim := range m.Claims {
		i := slices.IndexFunc(v.byClaim[claim], func(p *corev1.Pod) bool { return p.Spec.NodeName != n.Name && podReady(p) })
		if i < 0 {
			return false, "claim " + claim + " has no Ready replacement on another node yet", nil
		}
		runs := v.byClaim[claim][i].Spec.NodeName
		pv, err := claimVolume(ctx, v.client, claim)
		if err != nil {
			return false, "", err
		}
		for _, va := range byPV[pv] {
			if pv == "" {
				break
			}
			if va.Spec.NodeName != runs {
				return false, fmt.Sprintf("volume %s of claim %s still has an attachment on %s", pv, claim, va.Spec.NodeName), nil
			}
			if !va.Status.Attached {
				return false, fmt.Sprintf("volume %s of claim %s not attached to %s yet", pv, claim, runs), nil
			}
		}
	}
	return true, "", nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// cleanup closes the record of a node that is Ready again (or ran again
// since the loss), first removing the out-of-service taint if, and only if,
// fedfailover added it (the record says so; nothing on the member does).
func (r *Reconciler) cleanup(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	ours := p.Rec.OwnsTaint && len(withoutTaint(n.Spec.Taints)) != len(n.Spec.Taints)
	msg := p.Message
	if ours {
		// The KEP's advice: remove the taint only once the volumes released
		// through it are detached from the node, else a pod of the returning
		// node could start on a volume another node now writes.
		pv, err := r.trackedAttachment(ctx, v, n.Name, p.Rec.Claims)
		if err != nil {
			return 0, err
		}
		if pv != "" {
			p.Phase = v1alpha1.RecoveryPhaseRecovering
			p.Message = fmt.Sprintf("%s; the out-of-service taint stays while volume %s of a tracked claim is still attached to the node", p.Message, pv)
			p.taintLeft = fmt.Sprintf("taint on node %s of member %s could not be removed yet: volume %s of a tracked claim is still attached to it", n.Name, v.cluster, pv)
			return taintRemovalRecheck, nil
		}
		upd := n.DeepCopy()
		upd.Spec.Taints = withoutTaint(upd.Spec.Taints)
		if err := v.client.Patch(ctx, upd, client.MergeFromWithOptions(n, client.MergeFromWithOptimisticLock{})); err != nil {
			return 0, fmt.Errorf("removing the out-of-service taint: %w", err)
		}
		msg += "; out-of-service taint added by fedfailover removed"
	} else if p.Rec.Acted() && hasOutOfServiceTaint(n.Spec.Taints) {
		msg += "; the out-of-service taint stays: fedfailover did not add it (or cannot prove it did), so only its owner removes it"
	}
	if p.record != nil {
		if err := r.finishRecord(ctx, p.record, p.Finish, msg); err != nil {
			return 0, err
		}
	}
	p.Phase, p.Step = "", stepNone
	if p.Rec.Acted() && p.Rec.Recovered.IsZero() {
		metrics.NodeRecoveries.WithLabelValues(v.cluster, string(p.Rec.Action), metrics.NodeRecoveryResultNodeReturned).Inc()
	}
	if p.Rec.Acted() {
		r.report(ctx, v, n, corev1.EventTypeNormal, ReasonNodeReturned, "Cleanup", msg)
	}
	return 0, nil
}

// taintRemovalRecheck bounds the wait for a detach; attachments are
// watched, so a detach usually brings the next pass sooner.
const taintRemovalRecheck = 5 * time.Second

// trackedAttachment names a PersistentVolume of a tracked claim that is
// still attached to the node ("" when none is).
func (r *Reconciler) trackedAttachment(ctx context.Context, v *memberView, node string, claims []string) (string, error) {
	if len(v.vas[node]) == 0 {
		return "", nil
	}
	attached := map[string]bool{}
	for _, va := range v.vas[node] {
		attached[attachmentPV(va)] = true
	}
	for _, claim := range claims {
		pv, err := claimVolume(ctx, v.client, claim)
		if err != nil {
			return "", err
		}
		if pv != "" && attached[pv] {
			return pv, nil
		}
	}
	return "", nil
}

// deleteMachine asks Cluster API to delete the Machine of a blocked node, as
// a MachineHealthCheck would; its infrastructure deletion then fences it.
func (r *Reconciler) deleteMachine(ctx context.Context, v *memberView, n *corev1.Node, p *plan) error {
	m := v.machines[n.Name]
	if r.dryRun(v) {
		if r.store.changed(v.cluster, n.Name+"/machine", transitionDryRunMachineGone) {
			r.report(ctx, v, n, corev1.EventTypeNormal, ReasonWouldDeleteMachine, "DeleteMachine",
				fmt.Sprintf("dry run: would delete Machine %s/%s to fence the node", m.Namespace, m.Name))
		}
		return nil
	}
	if err := r.confirmStillLost(ctx, v, n); err != nil {
		var np *errNotProvenLive
		if errors.As(err, &np) {
			p.Message += "; Machine deletion not requested: " + np.why
			return nil
		}
		return err
	}
	uid, rv := m.UID, m.ResourceVersion
	if err := r.host.Delete(ctx, m, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // already going, or changed: the next pass sees it
		}
		return fmt.Errorf("deleting Machine %s/%s: %w", m.Namespace, m.Name, err)
	}
	p.Message += fmt.Sprintf("; requested deletion of Machine %s/%s", m.Namespace, m.Name)
	r.report(ctx, v, n, corev1.EventTypeNormal, ReasonMachineDeletionAsked, "DeleteMachine",
		fmt.Sprintf("deleted Machine %s/%s so that its infrastructure deletion fences the node", m.Namespace, m.Name))
	return nil
}

// machineOwners finds who already remediates each of the member's Machines,
// when the policy may ask for Machine deletion. MachineHealthChecks are read
// live (rare, and their CRD may be absent), once per namespace.
func (r *Reconciler) machineOwners(ctx context.Context, v *memberView) (map[string]string, error) {
	if v.policy == nil || !v.policy.Spec.NodeRecovery.Fencing.RequestMachineDeletion || len(v.machines) == 0 {
		return nil, nil
	}
	ready := map[string]bool{}
	for _, n := range v.nodes {
		ready[n.Name] = nodecond.IsReady(n)
	}
	mhcs := map[string][]clusterv1.MachineHealthCheck{}
	out := map[string]string{}
	for node, m := range v.machines {
		if ready[node] {
			continue // never a deletion candidate: no live list for it
		}
		list, ok := mhcs[m.Namespace]
		if !ok {
			var l clusterv1.MachineHealthCheckList
			if err := r.apiReader.List(ctx, &l, client.InNamespace(m.Namespace)); err != nil && !isNoMatch(err) {
				return nil, fmt.Errorf("listing MachineHealthChecks: %w", err)
			}
			list = l.Items
			mhcs[m.Namespace] = list
		}
		if owner := machineOwner(m, list); owner != "" {
			out[node] = owner
		}
	}
	return out, nil
}

// finalizerRecheck is the back-off while pods wait for their finalizers;
// pod updates are watched, so a removed finalizer brings the next pass.
const finalizerRecheck = 10 * time.Second

// splitHeld separates pods that are deleting and held by finalizers.
func splitHeld(pods []*corev1.Pod) (toDelete, held []*corev1.Pod) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil && len(p.Finalizers) > 0 {
			held = append(held, p)
		} else {
			toDelete = append(toDelete, p)
		}
	}
	return toDelete, held
}

// describeHeld names each held pod and its finalizers, for status.
func describeHeld(held []*corev1.Pod) string {
	parts := make([]string, 0, len(held))
	for _, p := range held {
		parts = append(parts, fmt.Sprintf("finalizer %s on pod %s/%s", strings.Join(p.Finalizers, ","), p.Namespace, p.Name))
	}
	return strings.Join(parts, "; ")
}
