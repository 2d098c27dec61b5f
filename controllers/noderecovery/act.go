package noderecovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
	"github.com/fedfailover/fedfailover/internal/remediation"
)

// Event reasons and decision actions.
const (
	ReasonFencingBlocked      = "FencingBlocked"
	ReasonRecoverySuspended   = "RecoverySuspended"
	ReasonOutOfServiceTainted = "OutOfServiceTaintApplied"
	ReasonForceDeleteStarted  = "ForceDeleteStarted"
	// ReasonForceDeletePaced: pods keep appearing on a fenced node; later
	// force-deletion rounds back off (pacer.go).
	ReasonForceDeletePaced     = "ForceDeletePaced"
	ReasonMachineDeletionAsked = "MachineDeletionRequested"
	ReasonRecovered            = "NodeRecovered"
	ReasonNodeReturned         = "NodeReturned"
	ReasonWouldRecover         = "DryRunWouldRecover"
	ReasonWouldDeleteMachine   = "DryRunWouldDeleteMachine"
	// ReasonEvidenceUnavailable (policy event): the member's management
	// cluster cannot be read, so none of its Machines is evidence;
	// ReasonEvidenceAvailable: it can be read again.
	ReasonEvidenceUnavailable   = "FencingEvidenceUnavailable"
	ReasonEvidenceAvailable     = "FencingEvidenceAvailable"
	transitionUnavailable       = "Unavailable"
	forceDeleteRecheck          = time.Second
	transitionBlocked           = "Blocked"
	transitionPaced             = "Paced"
	transitionSuspended         = "Suspended"
	transitionDryRun            = "DryRun"
	transitionDryRunMachineGone = "DryRunMachine"
)

// actOn carries out one node's plan. A loss is recorded before anything is
// done about it (its NodeRecovery record, owned by the policy); then the
// plan's step runs (apply).
func (r *Reconciler) actOn(ctx context.Context, v *memberView, np *nodePass) {
	if np.failed != nil {
		return
	}
	n, p := np.node, &np.plan
	if np.in.Record == nil && p.Phase != "" && v.policy != nil {
		rec, err := r.openRecord(ctx, v, n, np.in.Machine, np.in.Sighting, p)
		if errors.Is(err, errRecordNotSeenYet) {
			np.recordPending = true
			return
		}
		if err != nil {
			np.failed = err
			return
		}
		v.records[n.Name] = rec
	}
	p.record = v.records[n.Name]
	np.after, np.err = r.apply(ctx, v, n, p)
	if p.taintLeft != "" {
		v.taintsLeft = append(v.taintsLeft, p.taintLeft)
	}
}

// apply carries out the plan's step; it may advance p (phase, message).
func (r *Reconciler) apply(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	key := ""
	defer func() {
		if key == "" && p.Phase == v1alpha1.RecoveryPhaseBlocked {
			// notProven (a live re-check refused the act) reported the
			// transition already: keep it, or the next pass reports again.
			key = transitionBlocked
		}
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
		if r.dryRun(v) && (p.Step == stepTaint || p.Step == stepForceDelete) {
			// A record never lifts dry run: what it decided is not carried on.
			p.Message = fmt.Sprintf("dry run: nothing more is written (next step: %s); %s", p.Step, p.Message)
			return 0, r.track(ctx, v, n, p)
		}
		if p.Rec.ActedAt.IsZero() && (p.Step == stepTaint || p.Step == stepForceDelete) {
			return r.act(ctx, v, n, p)
		}
		if p.Step == stepForceDelete {
			after, err := r.forceDelete(ctx, v, n, p)
			if err != nil || after > 0 {
				return after, err
			}
		}
		return 0, r.track(ctx, v, n, p)
	case p.Step == stepRemediate:
		if r.dryRun(v) {
			key = transitionDryRunRemediate
			r.wouldRemediate(ctx, v, n, p)
			return 0, nil
		}
		return r.remediate(ctx, v, n, p)
	case p.Phase == v1alpha1.RecoveryPhaseSuspended:
		key = transitionSuspended
		if r.store.changed(v.cluster, n.Name, key) {
			r.report(ctx, v, n, corev1.EventTypeWarning, ReasonRecoverySuspended, "Suspend", p.Message)
		}
	case p.Phase == v1alpha1.RecoveryPhaseBlocked:
		key = transitionBlocked
		if r.store.changed(v.cluster, n.Name, key) {
			metrics.FencingBlocked.WithLabelValues(p.Verdict.Reason).Inc()
			reason := ReasonFencingBlocked
			if p.Remediation.Action == remediation.Fail {
				reason = ReasonRemediationFailed
			}
			r.report(ctx, v, n, corev1.EventTypeWarning, reason, "Block", p.Message)
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

// cleanup closes the record of a node that is Ready again (or ran again
// since the loss), first removing the out-of-service taint and the
// NoSchedule taint if, and only if, fedfailover added them (the record says
// so; nothing on the member does). A cordon is never touched: fedfailover
// never cordons.
func (r *Reconciler) cleanup(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	r.pacer.forget(v.cluster, n.Name)
	r.store.transition(v.cluster, n.Name+"/pace", "")
	ours := p.Rec.OwnsTaint && len(withoutTaint(n.Spec.Taints)) != len(n.Spec.Taints)
	lost := p.Rec.OwnsLostTaint && len(withoutLostTaint(n.Spec.Taints, p.Rec.UID)) != len(n.Spec.Taints)
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
	}
	if ours || lost {
		// The NoSchedule taint waits for nothing: it only kept new pods
		// away from a node that was off (the two never go together: one is
		// of the taint method, the other of ForceDelete).
		upd := n.DeepCopy()
		if ours {
			upd.Spec.Taints = withoutTaint(upd.Spec.Taints)
		}
		if lost {
			upd.Spec.Taints = withoutLostTaint(upd.Spec.Taints, p.Rec.UID)
		}
		if err := v.client.Patch(ctx, upd, client.MergeFromWithOptions(n, client.MergeFromWithOptimisticLock{})); err != nil {
			return 0, fmt.Errorf("removing fedfailover's taints: %w", err)
		}
	}
	switch {
	case ours:
		msg += "; out-of-service taint added by fedfailover removed"
	case p.Rec.Acted() && hasOutOfServiceTaint(n.Spec.Taints):
		msg += "; the out-of-service taint stays: fedfailover did not add it (or cannot prove it did), so only its owner removes it"
	}
	switch {
	case lost:
		msg += "; NoSchedule taint " + contract.TaintLost + " added by fedfailover removed"
	case p.Rec.LostTaint != "" && hasLostTaint(n.Spec.Taints):
		msg += "; the NoSchedule taint " + contract.TaintLost + " stays: it was there before fedfailover acted (or is not the one it added), so only its owner removes it"
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

// act records the intent, then acts, then records the action: a restart
// between any two steps finds the intent and (with a fencing verdict
// computed again) completes the action, or drops it. The taint patch is
// optimistic-locked on the Node just read live.
func (r *Reconciler) act(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	live, err := r.confirmFenced(ctx, v, n.Name, n, p)
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
			// Whether a NoSchedule taint with fedfailover's key is there
			// before us decides, for good, whether it may ever remove it.
			st.LostTaint = ""
			if p.LostTaint {
				st.LostTaint = v1alpha1.LostTaintOwned
				if hasLostTaint(live.Spec.Taints) {
					st.LostTaint = v1alpha1.LostTaintPreexisting
				}
			}
		}); err != nil {
			return 0, fmt.Errorf("recording the intent: %w", err)
		}
		p.Rec = recordedOf(rec)
	}
	// One patch, optimistic-locked on the Node just read live, adds what the
	// method needs: the out-of-service taint, or (ForceDelete on a node that
	// may still report Ready) the NoSchedule taint, before any pod is
	// deleted, so that the scheduler binds no replacement onto the node.
	upd := live.DeepCopy()
	// Only this patch proves that fedfailover added the out-of-service
	// taint: on a retry of a recorded intent (its patch failed, or the
	// process stopped) a taint that is there now may be another
	// remediator's, added in between, and is then recorded as not ours.
	foreignTaint := false
	if p.Method == v1alpha1.RecoveryMethodOutOfServiceTaint {
		foreignTaint = hasOutOfServiceTaint(live.Spec.Taints)
		upd.Spec.Taints = withTaint(upd.Spec.Taints)
	}
	if p.Rec.OwnsLostTaint {
		upd.Spec.Taints = withLostTaint(upd.Spec.Taints, p.Rec.UID)
	}
	if len(upd.Spec.Taints) != len(live.Spec.Taints) {
		if err := v.client.Patch(ctx, upd, client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})); err != nil {
			if p.Method == v1alpha1.RecoveryMethodOutOfServiceTaint {
				return 0, fmt.Errorf("applying the out-of-service taint: %w", err)
			}
			return 0, fmt.Errorf("applying the %s taint: %w", contract.TaintLost, err)
		}
	}
	now := r.now()
	if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.Phase, st.ActedAt = v1alpha1.RecoveryPhaseRecovering, metaTimePtr(now)
		st.TaintPreexisting = st.TaintPreexisting || foreignTaint
	}); err != nil {
		return 0, fmt.Errorf("recording the action: %w", err)
	}
	p.Rec = recordedOf(rec)
	p.Phase = v1alpha1.RecoveryPhaseRecovering
	reason := ReasonOutOfServiceTainted
	if p.Method == v1alpha1.RecoveryMethodForceDelete {
		reason = ReasonForceDeleteStarted
	}
	what := fmt.Sprintf("%s (%d claims tracked)", p.Method, len(p.Rec.Claims))
	switch p.Rec.LostTaint {
	case v1alpha1.LostTaintOwned:
		what += "; the node tainted " + contract.TaintLost + ":NoSchedule first, so that no replacement is scheduled onto it"
	case v1alpha1.LostTaintPreexisting:
		what += "; the node already had a " + contract.TaintLost + ":NoSchedule taint, left to its owner"
	}
	msg := what + "; " + p.Verdict.Message()
	if p.Loss.By == v1alpha1.NodeLossDetectionEvidence {
		msg = what + "; " + p.Loss.Message
	}
	r.report(ctx, v, n, corev1.EventTypeNormal, reason, string(p.Method), msg)
	p.podsNext = true
	return 0, nil
}

// deleteTaintedPods force-deletes the pods of a node act tainted in this
// pass, after every node of the pass got its taint: a node's hundred pods
// take seconds to delete, and a node found lost in the same pass must not
// wait that long for its taint. forceDelete proves the fence live again
// first.
func (r *Reconciler) deleteTaintedPods(ctx context.Context, v *memberView, np *nodePass) {
	if !np.plan.podsNext || np.err != nil {
		return
	}
	np.after, np.err = r.forceDelete(ctx, v, np.node, &np.plan)
}

// confirmFenced re-reads the Node from the member's API server, its Machine
// from the host's and, when the pass read it, the node's kubelet Lease from
// the member's, and runs the fencing verdict again, right before a
// destructive write. The caches can lag (the node may be Ready again, its
// Machine replaced, the Node re-created under the same name), and the write
// needs proof from now, for the same Node (UID) and the same Machine (UID,
// nodeRef). cached is the Node the pass decided on (nil for a deleted Node),
// p its plan (when its Ready condition was first seen, how it was found
// lost); the live Node is returned.
func (r *Reconciler) confirmFenced(ctx context.Context, v *memberView, name string, cached *corev1.Node, p *plan) (*corev1.Node, error) {
	if v.policy == nil {
		return nil, &errNotProvenLive{why: "no policy governs the member"}
	}
	if !r.members.HoldsMember(v.cluster) {
		return nil, notHolding(v.cluster)
	}
	live, err := r.liveNode(ctx, v, name, cached)
	if err != nil {
		return nil, err
	}
	m, err := r.liveMachine(ctx, v, v.machines[name], name)
	if err != nil {
		return nil, err
	}
	if live != nil {
		if err := r.confirmLease(ctx, v, live, p); err != nil {
			return nil, err
		}
	}
	s, now := p.sighting, r.now()
	in := fencing.Input{Node: live, Machine: m, Policy: v.policy.Spec.NodeRecovery.Fencing,
		LostSince: s.lossAt, SilentSince: liveConditionSeen(live, s, now), Now: now}
	if p.Loss.By == v1alpha1.NodeLossDetectionEvidence && live != nil {
		// The Lease was just read unchanged since this process's first
		// reading of its version, which the pass found silent: silent still.
		// A Ready condition the kubelet rewrote since the pass read the
		// Node (False, or a new True) is a kubelet that runs.
		if why := readyRewritten(cached, live); why != "" {
			return nil, &errNotProvenLive{why: why}
		}
		in.LostSince, in.KubeletSilent = evidenceSince(s, v.leases[name].LeaseSighting), p.Loss.silence.Describe()
	}
	// A remediation's success counts only as read now, from its object.
	in.Remediation = r.liveRemediationProof(ctx, v, live, p)
	res := fencing.Verdict(in)
	if !res.Fenced {
		return nil, &errNotProvenLive{why: res.Message()}
	}
	return live, nil
}

// confirmLease re-reads the node's kubelet Lease, when the pass read it,
// right before a destructive write. Any write to it since this process's
// first reading of the version the pass decided on (resourceVersion or
// renewTime changed) is a kubelet that runs, and cancels the write whatever
// the evidence says. For a node lost by evidence, a Lease that cannot be read
// cancels it too: the kubelet's silence is the half of the proof read from
// the member.
func (r *Reconciler) confirmLease(ctx context.Context, v *memberView, n *corev1.Node, p *plan) error {
	byEvidence := p.Loss.By == v1alpha1.NodeLossDetectionEvidence
	l := v.leases[n.Name]
	if l.FirstAt.IsZero() {
		if byEvidence {
			return &errNotProvenLive{why: fmt.Sprintf("node %s's kubelet Lease was not read in this pass", n.Name)}
		}
		return nil
	}
	uncached, err := r.members.GetUncachedClient(ctx, v.cluster)
	if err != nil {
		return err
	}
	now := r.now()
	reading, err := readLease(ctx, uncached, n)
	if err != nil {
		if byEvidence {
			return &errNotProvenLive{why: fmt.Sprintf("node %s: %v, so its kubelet's silence cannot be confirmed", n.Name, err)}
		}
		return nil // lost by its Ready condition: the Lease only ever cancels
	}
	r.sightings.observeLease(v.cluster, n, reading, now)
	if fencing.Renewed(l.First, reading) {
		return &errNotProvenLive{why: fmt.Sprintf("node %s's kubelet renewed its Lease since fedfailover first read it %s before "+
			"(resourceVersion %s, now %s): the kubelet runs", n.Name, now.Sub(l.FirstAt).Round(time.Second), l.First.Version, reading.Version)}
	}
	return nil
}

// readyRewritten says how the live Node's Ready condition shows a kubelet
// that posted since the pass read the Node (cached): False, or True with
// another transition time. The node lifecycle controller's Unknown does not.
func readyRewritten(cached, live *corev1.Node) string {
	was, now := nodecond.Ready(cached), nodecond.Ready(live)
	switch {
	case now == nil || now.Status == corev1.ConditionUnknown:
		return ""
	case was == nil, now.Status != was.Status, !now.LastTransitionTime.Time.Equal(was.LastTransitionTime.Time):
		return fmt.Sprintf("node %s's Ready condition is now %s since %s, not what the pass decided on: its kubelet posted",
			live.Name, now.Status, now.LastTransitionTime.UTC().Format(time.RFC3339))
	}
	return ""
}

// errNotProvenLive stops a destructive write whose proof did not hold when
// re-read from the API servers; the next pass decides again.
type errNotProvenLive struct{ why string }

func (e *errNotProvenLive) Error() string { return "not proven fenced on a live read: " + e.why }

// notHolding: with members sharded across replicas, only the holder of a
// member's Lease writes to it.
func notHolding(cluster string) error {
	return &errNotProvenLive{why: fmt.Sprintf("this replica does not hold member %s's lease", cluster)}
}

// liveConditionSeen is when the live Node's Ready condition was first seen:
// the sighting's time if it is the condition the pass decided on, else now
// (a condition never seen before has lasted no time yet).
func liveConditionSeen(live *corev1.Node, s sighting, now time.Time) time.Time {
	c := nodecond.Ready(live)
	if c == nil || c.Status != s.status || !c.LastTransitionTime.Time.Equal(s.since) || s.condAt.IsZero() {
		return now
	}
	return s.condAt
}

// liveNode re-reads the Node from the member's API server; nil when it is
// gone. It must be the Node the pass decided on: same UID, or still absent
// when cached is nil (a deleted Node).
func (r *Reconciler) liveNode(ctx context.Context, v *memberView, name string, cached *corev1.Node) (*corev1.Node, error) {
	uncached, err := r.members.GetUncachedClient(ctx, v.cluster)
	if err != nil {
		return nil, err
	}
	live := &corev1.Node{}
	switch err := uncached.Get(ctx, client.ObjectKey{Name: name}, live); {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return nil, fmt.Errorf("reading node %s live: %w", name, err)
	}
	switch {
	case cached == nil && live != nil:
		return nil, &errNotProvenLive{why: fmt.Sprintf("a Node named %s exists again (uid %s)", name, live.UID)}
	case cached != nil && live == nil:
		return nil, &errNotProvenLive{why: fmt.Sprintf("node %s was deleted since it was read", name)}
	case cached != nil && live.UID != cached.UID:
		return nil, &errNotProvenLive{why: fmt.Sprintf("node %s was re-created (uid %s, decided on %s)", name, live.UID, cached.UID)}
	}
	return live, nil
}

// liveMachine re-reads the cached Machine of node from the API server that
// holds it (the host's, or the member's management cluster's); nil when
// there was none or it is gone. A different Machine under the same name,
// one that names another node or none, or one with another providerID, is
// not this node's. A management cluster that cannot be read proves nothing:
// the write is refused.
func (r *Reconciler) liveMachine(ctx context.Context, v *memberView, cached *clusterv1.Machine, node string) (*clusterv1.Machine, error) {
	if cached == nil {
		return nil, nil
	}
	m := &clusterv1.Machine{}
	if err := r.machineReader(v).Get(ctx, client.ObjectKeyFromObject(cached), m); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if where := v.machineClients.Management; where != "" {
			return nil, &errNotProvenLive{why: fmt.Sprintf("fencing evidence unavailable: management cluster of member %s (kubeconfig Secret %s): reading Machine %s/%s live: %v",
				v.cluster, where, cached.Namespace, cached.Name, err)}
		}
		return nil, fmt.Errorf("reading Machine %s/%s live: %w", cached.Namespace, cached.Name, err)
	}
	// The same Machine (UID), still tied to this node: a Machine whose
	// nodeRef is empty is tied to no node.
	if m.UID != cached.UID || m.Status.NodeRef.Name != node || m.Spec.ProviderID != cached.Spec.ProviderID {
		return nil, nil
	}
	return m, nil
}

// notProven turns a failed live confirmation into a Blocked recovery (and
// an event on the transition); other errors fail the pass.
func (r *Reconciler) notProven(ctx context.Context, v *memberView, n *corev1.Node, p *plan, err error) (time.Duration, error) {
	var np *errNotProvenLive
	if !errors.As(err, &np) {
		return 0, err
	}
	p.Phase = v1alpha1.RecoveryPhaseBlocked
	p.Step = stepNone
	p.Message = "nothing deleted: " + np.Error()
	if r.store.changed(v.cluster, n.Name, transitionBlocked) {
		r.report(ctx, v, n, corev1.EventTypeWarning, ReasonFencingBlocked, "Block", p.Message)
	}
	return forceDeleteRecheck, nil
}

// forceDelete deletes the node's in-scope pods with grace period 0 and, for
// the ForceDelete method, once they are gone, the node's VolumeAttachments
// that no remaining pod uses. Idempotent: every pass deletes what is still
// there. Safe only because the node is proven fenced again, live, right
// before the deletes.
func (r *Reconciler) forceDelete(ctx context.Context, v *memberView, n *corev1.Node, p *plan) (time.Duration, error) {
	log := ctrl.LoggerFrom(ctx)
	// A pod already deleting that a finalizer holds cannot go any faster:
	// deleting it again every pass is only churn. Its containers are dead
	// with the fenced node, so the attachment step below may go on.
	pods, held := splitHeld(slices.DeleteFunc(inScope(v, n.Name), ownedByDaemonSet))
	round := paceKey{cluster: v.cluster, node: n.Name, record: p.Rec.UID}
	if len(pods) > 0 {
		if wait, rounds := r.pacer.wait(round, r.now()); wait > 0 {
			return r.paceRound(ctx, v, n, p, len(pods), rounds, wait), nil
		}
	}
	if len(pods) > 0 || len(held) > 0 || len(v.vas[n.Name]) > 0 {
		var cached *corev1.Node
		if n.UID != "" {
			cached = n
		}
		if _, err := r.confirmFenced(ctx, v, n.Name, cached, p); err != nil {
			return r.notProven(ctx, v, n, p, err)
		}
	}
	var deleted atomic.Int32
	defer func() {
		if deleted.Load() > 0 {
			r.pacer.deleted(round, r.now())
		}
	}()
	// A fenced Node's pods go in parallel, on the proof just made for the
	// Node: one after another, a node's hundred pods kept its member's
	// pass busy for 15 s, and every loss found on the member meanwhile
	// waited that long for its taint. An orphan's (a Node that no longer
	// exists) go one at a time, each after its own live read that the Node
	// is still absent, so that a Node registering under the name stops the
	// rest.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deleteWorkers(n))
	for _, pod := range pods {
		if gctx.Err() != nil {
			break // a delete failed, or the orphan's Node registered: no more
		}
		g.Go(func() error {
			if err := r.stillOrphan(gctx, v, n); err != nil {
				return err
			}
			// The pod exactly as read: a kubelet that has started it since
			// (a replacement registered under the same name) changed it,
			// and the delete is refused; the next pass decides on what it
			// sees then.
			uid, rv := pod.UID, pod.ResourceVersion
			target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
			err := v.client.Delete(gctx, target, client.GracePeriodSeconds(0), client.Preconditions{UID: &uid, ResourceVersion: &rv})
			switch {
			case apierrors.IsConflict(err):
				// Changed since read: not deleted; the next pass decides again.
				log.V(1).Info("Pod changed since read; not force-deleted", "pod", client.ObjectKeyFromObject(pod))
				return nil
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return fmt.Errorf("force-deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
			deleted.Add(1)
			log.Info("Force-deleted pod of fenced node", "pod", client.ObjectKeyFromObject(pod))
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		// A node no longer proven absent (stillOrphan) blocks the recovery;
		// a failed delete fails the pass.
		return r.notProven(ctx, v, n, p, err)
	}
	if len(pods) > 0 {
		p.Message = fmt.Sprintf("force-deleted %d of %d pods of the fenced node", deleted.Load(), len(pods))
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
		err := v.client.Delete(ctx, va, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			continue // gone, or changed since read: the next pass decides again
		case err != nil:
			return 0, fmt.Errorf("deleting VolumeAttachment %s: %w", va.Name, err)
		}
		log.Info("Deleted VolumeAttachment of fenced node", "volumeAttachment", va.Name, "persistentVolume", pv)
	}
	return after, nil
}

// paceRound holds a later force-deletion round back (pacer.go) and says
// why, with an event when the hold starts.
func (r *Reconciler) paceRound(ctx context.Context, v *memberView, n *corev1.Node, p *plan, pods, rounds int, wait time.Duration) time.Duration {
	p.Message = fmt.Sprintf("%d pods bound to the fenced node again after %d force-deletion rounds "+
		"(the member's scheduler may not see the node's taints yet); the next round in %s", pods, rounds, wait.Round(time.Second))
	if r.store.changed(v.cluster, n.Name+"/pace", transitionPaced) {
		r.report(ctx, v, n, corev1.EventTypeWarning, ReasonForceDeletePaced, "Pace", p.Message)
	}
	return wait
}

// stillOrphan re-reads, before each delete of a deleted Node's pods or
// attachments, that no Node of that name exists: a replacement registering
// under the same name would run those pods, and the first check of the pass
// is milliseconds to seconds old by the last delete. For a Node that exists
// it is a no-op (the Node's UID was checked live once, its pods carry
// preconditions).
func (r *Reconciler) stillOrphan(ctx context.Context, v *memberView, n *corev1.Node) error {
	if n.UID != "" {
		return nil
	}
	_, err := r.liveNode(ctx, v, n.Name, nil)
	return err
}

// podDeleteWorkers bounds one node's force-deletes in flight; the member's
// client rate limit (member.Options QPS and Burst) bounds them overall.
const podDeleteWorkers = 16

// deleteWorkers: a fenced Node's pods go podDeleteWorkers at a time, on the
// Node's live proof; an orphan's (n.UID is empty) one at a time, each after
// its own live read (stillOrphan).
func deleteWorkers(n *corev1.Node) int {
	if n.UID == "" {
		return 1
	}
	return podDeleteWorkers
}

// finalizerRecheck is the back-off while pods wait for their finalizers;
// pod updates are watched, so a removed finalizer brings the next pass.
const finalizerRecheck = 10 * time.Second

// splitHeld separates pods that are deleting and held by finalizers.
func splitHeld(pods []*cachedpod.Pod) (toDelete, held []*cachedpod.Pod) {
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
func describeHeld(held []*cachedpod.Pod) string {
	parts := make([]string, 0, len(held))
	for _, p := range held {
		parts = append(parts, fmt.Sprintf("finalizer %s on pod %s/%s", strings.Join(p.Finalizers, ","), p.Namespace, p.Name))
	}
	return strings.Join(parts, "; ")
}

func ownedByDaemonSet(p *cachedpod.Pod) bool {
	// A DaemonSet recreates its pod on the same node: deleting it is churn.
	return slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" })
}

// volumesInUse returns the PVs of the pods still on the node (out of scope):
// their attachments stay.
func (r *Reconciler) volumesInUse(ctx context.Context, v *memberView, node string) (map[string]bool, error) {
	out := map[string]bool{}
	// In-scope pods already force-deleted (held by a finalizer) no longer
	// use their volumes: the node is fenced.
	using := slices.DeleteFunc(slices.Clone(v.pods[node]), func(p *cachedpod.Pod) bool {
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

func attachmentPV(va *storagev1.VolumeAttachment) string {
	if va.Spec.Source.PersistentVolumeName == nil {
		return ""
	}
	return *va.Spec.Source.PersistentVolumeName
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
		i := slices.IndexFunc(v.byClaim[claim], func(p *cachedpod.Pod) bool { return p.NodeName != n.Name && podReady(p) })
		if i < 0 {
			return false, "claim " + claim + " has no Ready replacement on another node yet", nil
		}
		runs := v.byClaim[claim][i].NodeName
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

func podReady(p *cachedpod.Pod) bool {
	if p.DeletionTimestamp != nil || p.Phase != corev1.PodRunning {
		return false
	}
	return slices.ContainsFunc(p.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
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
	// In the API server that holds the Machine: the host's, or the member's
	// management cluster's.
	writer := v.machineClients.Writer
	if writer == nil {
		writer = r.host
	}
	if err := writer.Delete(ctx, m, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
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

// confirmStillLost re-reads the Node from the member's API server before a
// Machine deletion is requested: it must be the same Node, still not Ready.
// (The Machine itself is deleted with UID and resourceVersion preconditions.)
func (r *Reconciler) confirmStillLost(ctx context.Context, v *memberView, n *corev1.Node) error {
	if !r.members.HoldsMember(v.cluster) {
		return notHolding(v.cluster)
	}
	live, err := r.liveNode(ctx, v, n.Name, n)
	if err != nil {
		return err
	}
	if nodecond.IsReady(live) {
		return &errNotProvenLive{why: fmt.Sprintf("node %s is Ready again", n.Name)}
	}
	return nil
}

// OutOfServiceTaint is the KEP-2268 taint, with the value the Kubernetes
// documentation uses.
var OutOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// hasOutOfServiceTaint: any out-of-service taint, whoever put it.
func hasOutOfServiceTaint(taints []corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeOutOfService })
}

// withTaint returns the taints plus the out-of-service taint, once.
func withTaint(taints []corev1.Taint) []corev1.Taint {
	if hasOutOfServiceTaint(taints) {
		return taints
	}
	return append(slices.Clone(taints), OutOfServiceTaint)
}

// lostTaintOf is fedfailover's NoSchedule taint for the record uid.
func lostTaintOf(uid types.UID) corev1.Taint {
	return corev1.Taint{Key: contract.TaintLost, Value: string(uid), Effect: corev1.TaintEffectNoSchedule}
}

// hasLostTaint: a NoSchedule taint with fedfailover's key, whoever put it
// (a Node holds at most one taint per key and effect).
func hasLostTaint(taints []corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(t corev1.Taint) bool {
		return t.Key == contract.TaintLost && t.Effect == corev1.TaintEffectNoSchedule
	})
}

// withLostTaint returns the taints plus the record's NoSchedule taint,
// unless one with its key and effect is there already.
func withLostTaint(taints []corev1.Taint, uid types.UID) []corev1.Taint {
	if hasLostTaint(taints) {
		return taints
	}
	return append(slices.Clone(taints), lostTaintOf(uid))
}

// withoutLostTaint drops only the record's exact NoSchedule taint: one with
// another value was put by someone else (or for another record).
func withoutLostTaint(taints []corev1.Taint, uid types.UID) []corev1.Taint {
	ours := lostTaintOf(uid)
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool {
		return t.Key == ours.Key && t.Value == ours.Value && t.Effect == ours.Effect
	})
}

// withoutTaint drops only the exact taint fedfailover adds: an
// out-of-service taint with another value or effect was put by someone else.
func withoutTaint(taints []corev1.Taint) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool {
		return t.Key == OutOfServiceTaint.Key && t.Value == OutOfServiceTaint.Value && t.Effect == OutOfServiceTaint.Effect
	})
}
