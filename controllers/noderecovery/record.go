package noderecovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
	"github.com/fedfailover/fedfailover/internal/policystatus"
	"github.com/fedfailover/fedfailover/internal/wake"
)

// A pass's host records, in the order the pass writes them: settled before
// any node is decided (settle), opened and advanced while acting (act.go),
// and summarised once at the end with the status report, the member Events
// and the gauges (summarise).

// settle makes each node's record fit its Node before anything is decided
// (closeReplaced, then migrate), one nodePass per node of the view, in its
// order. A node whose record cannot be settled is left out of the pass
// (nodePass.failed); the others go on.
func (r *Reconciler) settle(ctx context.Context, v *memberView) []*nodePass {
	out := make([]*nodePass, 0, len(v.nodes))
	for _, n := range v.nodes {
		np := &nodePass{node: n, log: ctrl.LoggerFrom(ctx).WithValues("node", n.Name)}
		out = append(out, np)
		nctx := ctrl.LoggerInto(ctx, np.log)
		if np.failed = r.closeReplaced(nctx, v, n); np.failed != nil {
			continue
		}
		migrated, err := r.migrate(nctx, v, n)
		if err != nil {
			np.failed = err
			continue
		}
		np.node = migrated
	}
	return out
}

// closeReplaced closes the active record of a node name whose Node now has
// another UID: the record was about a Node that no longer exists, and
// nothing it says applies to the new one.
func (r *Reconciler) closeReplaced(ctx context.Context, v *memberView, n *corev1.Node) error {
	rec := v.records[n.Name]
	if rec == nil || rec.Spec.NodeUID == string(n.UID) {
		return nil
	}
	delete(v.records, n.Name)
	return r.finishRecord(ctx, rec, v1alpha1.FinishNodeReplaced,
		fmt.Sprintf("Node %s was re-created (uid %s, record about %s); the new Node is judged afresh", n.Name, n.UID, rec.Spec.NodeUID))
}

// migrate reads, once, the node annotations an older fedfailover kept on
// member Nodes into a host record, and removes them. Anyone with nodes/patch
// can write those annotations, so the record made from them is marked
// Migrated: it shows what was done and tracks the claims, but never makes
// fedfailover remove a taint, and, like every record, never authorizes a
// destructive write (each needs a fencing verdict from live reads). It
// returns the Node the pass goes on with: n itself, or, once the annotations
// are removed, a copy of n without them (n is the cache's own: never
// modified).
func (r *Reconciler) migrate(ctx context.Context, v *memberView, n *corev1.Node) (*corev1.Node, error) {
	if !contract.HasNodeMarks(n.Annotations) || r.paused(v) || r.dryRun(v) {
		return n, nil
	}
	marks, _ := contract.DecodeNodeMarks(n.Annotations)
	if cond := nodecond.Ready(n); v.records[n.Name] == nil && marks.Acted() && cond != nil && !nodecond.IsReady(n) && v.policy != nil {
		rec := &v1alpha1.NodeRecovery{
			ObjectMeta: metav1.ObjectMeta{Name: recordName(v.cluster, n.Name, n.UID, cond.LastTransitionTime.Time)},
			Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: v.cluster, Node: n.Name, NodeUID: string(n.UID),
				ProviderID: n.Spec.ProviderID, Policy: v.policy.Name, LostSince: metaTimePtr(marks.LostSince)},
		}
		if err := ensureFinalizer(ctx, r.host, v.policy); err != nil {
			return nil, err
		}
		if err := r.createRecord(ctx, rec); err != nil {
			return nil, err
		}
		now := r.now()
		if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
			st.Phase, st.Migrated, st.Method, st.Evidence, st.Claims = v1alpha1.RecoveryPhaseRecovering, true, marks.Action, marks.FencedBy, marks.Claims
			st.IntentAt, st.ActedAt, st.RecoveredAt = metaTimePtr(marks.FencedAt), metaTimePtr(marks.FencedAt), metaTimePtr(marks.RecoveredAt)
			st.ObservedAt, st.ReadyObservedAt = metaTimePtr(now), metaTimePtr(now)
			st.ReadyStatus, st.ReadySince = string(cond.Status), metaTimePtr(cond.LastTransitionTime.Time)
			st.Message = "made from the node annotations of an older fedfailover; its taint, if any, is left to its owner"
		}); err != nil {
			return nil, err
		}
		v.records[n.Name] = rec
	}
	upd := n.DeepCopy()
	for _, k := range contract.NodeMarkKeys() {
		delete(upd.Annotations, k)
	}
	if err := v.client.Patch(ctx, upd, client.MergeFromWithOptions(n, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("removing old recovery annotations from node: %w", err)
	}
	migrated := *n
	migrated.Annotations = upd.Annotations
	return &migrated, nil
}

// summarise ends the pass in one place, once every node was acted on, so
// that every node's way ends alike, failed or not: its record takes its
// plan's phase and message, the status report its entry. Then the records
// of deleted Nodes are closed, the member Events written, expired records
// pruned and the gauges set. One node's error fails the pass only here,
// after every other node was handled.
func (r *Reconciler) summarise(ctx context.Context, v *memberView, now time.Time, storm stormOutcome, nodes []*nodePass, orphans []outcome) (ctrl.Result, error) {
	rep := memberReport{Storm: storm.Suspended, StormMessage: storm.message}
	if v.policy != nil {
		rep.Policy = v.policy.Name
	}
	var next wake.Soonest
	next.In(now, storm.ResumeAt.Sub(now))
	outs := make([]outcome, 0, len(nodes)+len(orphans))
	for _, np := range nodes {
		outs = append(outs, r.nodeOutcome(ctrl.LoggerInto(ctx, np.log), v, np))
	}
	var errs []error
	for _, o := range append(outs, orphans...) {
		if o.err != nil {
			errs = append(errs, o.err)
		}
		if o.status != nil {
			rep.Recoveries = append(rep.Recoveries, *o.status)
		}
		next.In(now, o.after)
	}
	rep.TaintsLeft = v.taintsLeft
	if err := r.closeDeleted(ctx, v); err != nil {
		errs = append(errs, err)
	}
	r.writeNodeEvents(ctx, v)
	if err := r.pruneRecords(ctx, v.finished); err != nil {
		errs = append(errs, err)
	}
	observeMember(v.cluster, v.nodes, v.records, rep.Recoveries)
	r.store.publish(v.cluster, rep)
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	// A member with a recovery going on is looked at every ResyncPeriod, so
	// evidence that appears without an event we watch is still seen; a quiet
	// one every IdleResync (policy selection also depends on KubeFedCluster
	// labels).
	resync := r.opts.ResyncPeriod
	if len(rep.Recoveries) == 0 && !rep.Storm {
		resync = r.opts.IdleResync
	}
	return ctrl.Result{RequeueAfter: next.After(now, 0, resync)}, nil
}

// nodeOutcome ends one node's pass: its record takes the plan's phase and
// message (unless acting failed, or closed the record).
func (r *Reconciler) nodeOutcome(ctx context.Context, v *memberView, np *nodePass) outcome {
	n, p := np.node, &np.plan
	if np.failed != nil {
		return outcome{err: fmt.Errorf("node %s: %w", n.Name, np.failed)}
	}
	if np.recordPending {
		return outcome{status: recoveryStatus(v.cluster, n, np.in.Machine, *p, v), after: time.Second}
	}
	err := np.err
	if err == nil {
		if p.record != nil && p.record.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			err = r.syncRecord(ctx, v, p.record, p)
		}
	}
	if apierrors.IsConflict(err) {
		// A record or the Node changed since the cache showed it (often our
		// own write of the last pass): decide again on the new one.
		ctrl.LoggerFrom(ctx).V(1).Info("Stale read; deciding again", "reason", err.Error())
		return outcome{status: recoveryStatus(v.cluster, n, np.in.Machine, *p, v), after: time.Second}
	}
	if err != nil {
		return outcome{err: fmt.Errorf("node %s: %w", n.Name, err)}
	}
	after := np.after
	if after == 0 {
		after = p.RequeueAfter
	}
	return outcome{status: recoveryStatus(v.cluster, n, np.in.Machine, *p, v), after: after}
}

// recoveryStatus is the node's status entry; nil when there is nothing to
// report.
func recoveryStatus(cluster string, n *corev1.Node, m *clusterv1.Machine, p plan, v *memberView) *v1alpha1.NodeRecoveryStatus {
	if p.Phase == "" {
		return nil
	}
	st := &v1alpha1.NodeRecoveryStatus{Cluster: cluster, Node: n.Name, Phase: p.Phase, Method: p.Method,
		Detection: p.Loss.By, Message: policystatus.Truncate(p.Message, 1024)}
	if p.record != nil && p.record.Status.Detection != "" {
		st.Detection = p.record.Status.Detection
	}
	if m != nil {
		st.Machine = m.Namespace + "/" + m.Name
	}
	if p.record != nil && p.record.Status.Remediation != nil {
		rr := p.record.Status.Remediation
		st.Remediation = fmt.Sprintf("%s %s/%s", rr.Kind, rr.Namespace, rr.Name)
	}
	if !p.LostSince.IsZero() {
		t := metaTime(p.LostSince)
		st.LostSince = &t
	}
	switch {
	case !p.Rec.ActedAt.IsZero():
		t := metaTime(p.Rec.ActedAt)
		st.FencedAt = &t
		st.Evidence = p.Rec.FencedBy
		st.AffectedPods = int32(len(p.Rec.Claims))
	case p.Verdict.Fenced:
		st.Evidence = p.Verdict.Reason
	}
	if st.AffectedPods == 0 && v.policy != nil {
		st.AffectedPods = int32(len(inScope(v, n.Name)))
	}
	return st
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }

// closeDeleted closes the active records of Nodes that no longer exist (and
// forgets their sightings).
func (r *Reconciler) closeDeleted(ctx context.Context, v *memberView) error {
	present := map[string]bool{}
	for _, n := range v.nodes {
		present[n.Name] = true
	}
	r.sightings.forget(v.cluster, func(node string) bool { return present[node] })
	// A deleted node whose pods or attachments remain is still being
	// recovered: its record stays active and tells which Machine was its.
	for _, node := range orphanNodes(v) {
		present[node] = true
	}
	for node, rec := range v.records {
		if present[node] {
			continue
		}
		if err := r.finishRecord(ctx, rec, v1alpha1.FinishNodeDeleted, "Node "+node+" was deleted"); err != nil {
			return err
		}
		delete(v.records, node)
	}
	return nil
}

// maxNodeEventsPerPass caps the Events one pass writes to a member. They
// are written after every node has been decided and acted on, one request
// each behind the member's client rate limit: when a thousand nodes go
// NotReady at once (seen at 3 x 2,000 x 10 on an overloaded lab), writing
// them all held the member's pass, and so a taint due on the next one, for
// tens of seconds. The rest are only logged: the FailoverPolicy's events
// and decisions still say what happened to each node.
const maxNodeEventsPerPass = 50

// writeNodeEvents writes the pass's member Events, up to the cap.
func (r *Reconciler) writeNodeEvents(ctx context.Context, v *memberView) {
	log := ctrl.LoggerFrom(ctx)
	for i, ev := range v.nodeEvents {
		if i == maxNodeEventsPerPass {
			log.Info("Events on member Nodes not written: more than the cap in one pass",
				"written", maxNodeEventsPerPass, "skipped", len(v.nodeEvents)-maxNodeEventsPerPass)
			break
		}
		if err := v.client.Create(ctx, ev); err != nil {
			log.Error(err, "Writing event on member Node failed", "node", ev.InvolvedObject.Name)
		}
	}
	v.nodeEvents = nil
}

// pruneRecords deletes finished records past the retention period, and the
// oldest beyond the per-member limit.
func (r *Reconciler) pruneRecords(ctx context.Context, finished []*v1alpha1.NodeRecovery) error {
	slices.SortFunc(finished, func(a, b *v1alpha1.NodeRecovery) int {
		return timeOf(b.Status.FinishedAt).Compare(timeOf(a.Status.FinishedAt)) // newest first
	})
	now := r.now()
	for i, rec := range finished {
		if i < r.opts.MaxFinishedRecords && now.Sub(timeOf(rec.Status.FinishedAt)) < r.opts.RecordRetention {
			continue
		}
		uid := rec.UID
		if err := r.host.Delete(ctx, rec, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting expired NodeRecovery %s: %w", rec.Name, err)
		}
	}
	return nil
}

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

// reportUnreachable publishes, for a member that cannot be reached, the
// taints fedfailover added there that it cannot remove until it can.
func (r *Reconciler) reportUnreachable(ctx context.Context, cluster string, why error) error {
	active, _, err := r.memberRecords(ctx, cluster)
	if err != nil {
		return err
	}
	var rep memberReport
	for node, rec := range active {
		if m := recordedOf(rec); (!m.OwnsTaint && !m.OwnsLostTaint) || rec.Status.ActedAt == nil {
			continue
		}
		rep.Policy = rec.Spec.Policy
		rep.TaintsLeft = append(rep.TaintsLeft, fmt.Sprintf("taint on node %s of member %s cannot be removed while the member is unreachable: %v", node, cluster, why))
	}
	if rep.Policy != "" {
		slices.Sort(rep.TaintsLeft)
		r.store.publish(cluster, rep)
	}
	return nil
}

// Writing the records: each is created under a name fixed by its loss
// (recordName), its status patched optimistic-locked on the record as the
// pass read it (updateRecord).

// openRecord creates the record of a newly seen loss, owned by the policy.
func (r *Reconciler) openRecord(ctx context.Context, v *memberView, n *corev1.Node, m *clusterv1.Machine, s sighting, p *plan) (*v1alpha1.NodeRecovery, error) {
	cond := nodecond.Ready(n)
	since := metav1.NewTime(cond.LastTransitionTime.Time)
	rec := &v1alpha1.NodeRecovery{
		ObjectMeta: metav1.ObjectMeta{Name: recordName(v.cluster, n.Name, n.UID, cond.LastTransitionTime.Time)},
		Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: v.cluster, Node: n.Name, NodeUID: string(n.UID),
			ProviderID: n.Spec.ProviderID, Policy: v.policy.Name, LostSince: &since},
	}
	if m != nil {
		rec.Spec.Machine = &v1alpha1.MachineReference{Namespace: m.Namespace, Name: m.Name, UID: string(m.UID)}
	}
	// No owner reference: a record may own a taint, and a policy deleted
	// with foreground cascading (the default prune of GitOps tools) would
	// have its dependents collected before any finalizer of ours ran. The
	// member pass finishes records and prunes finished ones itself.
	if err := ensureFinalizer(ctx, r.host, v.policy); err != nil {
		return nil, err
	}
	if err := r.createRecord(ctx, rec); err != nil {
		return nil, err
	}
	// The status is written with the first sync (the create ignores it).
	rec.Status = v1alpha1.NodeRecoveryRecordStatus{}
	if err := r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.ObservedAt, st.ReadyObservedAt = metaTimePtr(s.lossAt), metaTimePtr(s.condAt)
		if !p.Loss.At.IsZero() {
			st.ObservedAt = metaTimePtr(p.Loss.At) // by evidence, the node may still report Ready
		}
		st.ReadyStatus, st.ReadySince = string(cond.Status), &since
	}); err != nil {
		return nil, err
	}
	return rec, r.syncRecord(ctx, v, rec, p)
}

// recordName is deterministic for one loss of one Node, so that a pass that
// does not see its own create yet (cache lag) gets AlreadyExists instead of
// a second record.
func recordName(cluster, node string, uid types.UID, since time.Time) string {
	h := sha256.Sum256([]byte(cluster + "\x00" + node + "\x00" + string(uid) + "\x00" + since.UTC().Format(time.RFC3339)))
	base := cluster + "." + node
	if len(base) > 240 {
		base = base[:240]
	}
	return base + "." + hex.EncodeToString(h[:])[:10]
}

// createRecord creates rec under its deterministic name or, when a finished
// record of the same loss holds that name (the loss was closed, e.g. for
// want of a policy, and is taken up again), under the next free suffix.
func (r *Reconciler) createRecord(ctx context.Context, rec *v1alpha1.NodeRecovery) error {
	base := rec.Name
	for i := 1; ; i++ {
		err := r.host.Create(ctx, rec)
		if !apierrors.IsAlreadyExists(err) {
			if err != nil {
				return fmt.Errorf("creating NodeRecovery record: %w", err)
			}
			return nil
		}
		old := &v1alpha1.NodeRecovery{}
		if err := r.apiReader.Get(ctx, client.ObjectKey{Name: rec.Name}, old); err != nil {
			return fmt.Errorf("reading NodeRecovery %s: %w", rec.Name, err)
		}
		if old.Status.Phase != v1alpha1.RecoveryPhaseFinished || i > 8 {
			return errRecordNotSeenYet
		}
		rec.Name = fmt.Sprintf("%s-%d", base, i)
	}
}

// errRecordNotSeenYet: the record exists but the cache has not caught up.
var errRecordNotSeenYet = fmt.Errorf("NodeRecovery record not in the cache yet")

// releaseOwners drops the owner references an active record of an older
// version carries (to its policy), so that no garbage collection, however
// its owner is deleted, can take the proof that a taint is fedfailover's.
func (r *Reconciler) releaseOwners(ctx context.Context, rec *v1alpha1.NodeRecovery) error {
	if len(rec.OwnerReferences) == 0 || rec.Status.Phase == v1alpha1.RecoveryPhaseFinished {
		return nil
	}
	patch := client.MergeFromWithOptions(rec.DeepCopy(), client.MergeFromWithOptimisticLock{})
	rec.OwnerReferences = nil
	if err := r.host.Patch(ctx, rec, patch); err != nil {
		return fmt.Errorf("releasing NodeRecovery %s from its owners: %w", rec.Name, err)
	}
	return nil
}

// ensureFinalizer puts the finalizer on the policy before its first record
// exists, so that no record outlives the policy unnoticed.
func ensureFinalizer(ctx context.Context, host client.Client, p *v1alpha1.FailoverPolicy) error {
	if controllerutil.ContainsFinalizer(p, contract.FinalizerNodeRecovery) {
		return nil
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(p, contract.FinalizerNodeRecovery)
	if err := host.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("adding finalizer to policy %s: %w", p.Name, err)
	}
	return nil
}

// syncRecord writes the plan's phase and message, and the node's current
// Ready condition, to the record when they changed. The write is
// optimistic-locked: a record changed since the pass read it fails the pass,
// and the next one decides on the new record.
func (r *Reconciler) syncRecord(ctx context.Context, v *memberView, rec *v1alpha1.NodeRecovery, p *plan) error {
	if err := r.releaseOwners(ctx, rec); err != nil {
		return err
	}
	return r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		if p.Phase != "" {
			st.Phase = p.Phase
		}
		st.Message = policystatus.Truncate(p.Message, 1024)
		if st.Evidence == "" && p.Verdict.Fenced {
			st.Evidence = p.Verdict.Reason
		}
		if st.IntentAt == nil && p.Method != "" {
			st.Method = p.Method
		}
		st.DryRun = r.dryRun(v)
		recordRemediationResult(v.cluster, st, p.Remediation, r.now())
		if st.Detection == "" && p.Loss.By != "" {
			// How this loss was found, once: shown, never read back.
			st.Detection, st.DetectedBy = p.Loss.By, policystatus.Truncate(p.Loss.Message, 1024)
		}
		if p.sighting.lossAt.IsZero() {
			return
		}
		st.ReadyStatus, st.ReadySince = string(p.sighting.status), metaTimePtr(p.sighting.since)
		st.ReadyObservedAt = metaTimePtr(p.sighting.condAt)
	})
}

// updateRecord applies change to the record's status and writes it if it
// changed, with the record's resourceVersion as precondition.
func (r *Reconciler) updateRecord(ctx context.Context, rec *v1alpha1.NodeRecovery, change func(*v1alpha1.NodeRecoveryRecordStatus)) error {
	before := rec.DeepCopy()
	change(&rec.Status)
	if equality.Semantic.DeepEqual(before.Status, rec.Status) {
		return nil
	}
	if err := r.host.Status().Patch(ctx, rec, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		*rec = *before
		return fmt.Errorf("updating NodeRecovery %s: %w", rec.Name, err)
	}
	return nil
}

// finishRecord closes the record, first deleting the loss's remediation
// object if fedfailover requested it: the remediator's work is over.
func (r *Reconciler) finishRecord(ctx context.Context, rec *v1alpha1.NodeRecovery, reason, msg string) error {
	deleted, err := r.deleteRemediation(ctx, rec)
	if err != nil {
		return err
	}
	msg += deleted
	now := r.now()
	return r.updateRecord(ctx, rec, func(st *v1alpha1.NodeRecoveryRecordStatus) {
		st.Phase, st.FinishReason, st.Message = v1alpha1.RecoveryPhaseFinished, reason, policystatus.Truncate(msg, 1024)
		st.FinishedAt = metaTimePtr(now)
	})
}

func metaTimePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}
