package rebalance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/kubefedhealth"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// A release gives an RSP that no policy manages any more (its policy
// deleted, rebalancing turned off, its selector no longer matching) back
// to the user: the decision is planner.Release, this file gathers its
// inputs and writes its result. It is driven by the RSP's RebalanceRecord,
// not by the policy: a record not released, whose RSP no policy manages, is
// a release in progress, and each pass over the RSP takes it one step
// further until the RSP is the user's spec again. The policy's finalizer
// only hands the release over to the record (releaseHandover), so a policy
// being deleted never waits for a member to come back.

// defaultReleaseMaxStep is failback.maxStep's API default: the step of a
// release whose policy was gone before it could record its own.
const defaultReleaseMaxStep = 2

// releaseSettle is how long the replicas a release step moved back must
// stay Ready (with kubefed's assignment seen by every member) before the
// members that carried them give theirs up: a pod Ready for one reading
// may be on its way out, and a release has no policy clock of its own.
const releaseSettle = 5 * time.Second

// releaseParams is what a release needs of the policy that started it.
func releaseParams(pol *v1alpha1.FailoverPolicy, now time.Time) *v1alpha1.RebalanceRelease {
	step := int32(defaultReleaseMaxStep)
	if pol != nil && pol.Spec.Rebalance != nil && pol.Spec.Rebalance.Failback.MaxStep > 0 {
		step = pol.Spec.Rebalance.Failback.MaxStep
	}
	return &v1alpha1.RebalanceRelease{Since: metav1.NewTime(now.Truncate(time.Second)), MaxStep: step}
}

// recordedPolicy is the policy named by the record; nil when it is gone.
func (r *Reconciler) recordedPolicy(ctx context.Context, name string) (*v1alpha1.FailoverPolicy, error) {
	if name == "" {
		return nil, nil
	}
	pol := &v1alpha1.FailoverPolicy{}
	if err := r.host.Get(ctx, client.ObjectKey{Name: name}, pol); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting FailoverPolicy %s: %w", name, err)
	}
	return pol, nil
}

// release takes the release of an RSP no policy manages one step further
// (planner.Release): its RebalanceRecord first says a release is on (with
// its step), then the RSP is written when the decision moves replicas,
// then the record says what was written and what the release waits for;
// once the RSP is the user's spec, the record is marked released (kept:
// the spec carries no pin of fedfailover's). Without a record or a legacy
// annotation of its own there is nothing to restore from: nothing is
// written. While the policy named by the record still exists and is
// paused, nothing is written at all.
func (r *Reconciler) release(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(rsp)
	st, m, err := r.releaseState(ctx, rsp)
	if err != nil || m == nil {
		if err == nil {
			r.forget(key)
		}
		return ctrl.Result{}, err
	}
	pol, err := r.recordedPolicy(ctx, m.Policy)
	if err != nil {
		return ctrl.Result{}, err
	}
	if pol != nil && pol.DeletionTimestamp == nil && pol.Spec.Paused {
		r.hold(ctx, pol, rsp, v1alpha1.ReasonPaused, errors.New("the policy is paused (spec.paused): its release waits until it is unpaused or deleted"))
		return ctrl.Result{}, nil
	}
	now := r.now()
	live := specPlacement(rsp)
	m, edited := baselineOf(m, live, ownersOf(rsp.ManagedFields), m.Policy)
	if edited {
		r.reportRelease(ctx, pol, rsp, ReasonAdoptedUserEdit, ActionBaselineChanged, corev1.EventTypeNormal,
			"spec changed by someone else during the release: their fields are adopted into the baseline")
	}
	params := releaseParams(pol, now)
	if st.rec != nil && st.rec.Spec.Release != nil {
		params = st.rec.Spec.Release.DeepCopy()
	}
	// The intent first: the record says a release is on before it moves
	// anything.
	if err := r.saveRelease(ctx, rsp, m, params, &st); err != nil {
		return r.releaseRetry(err)
	}
	in, err := r.releaseInput(ctx, rsp, m, params.MaxStep)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := planner.Release(in)
	if wait, ok := r.settled(key, res, now); !ok {
		res = planner.ReleaseResult{Result: planner.Result{Clusters: rsp.Spec.Clusters, TotalReplicas: rsp.Spec.TotalReplicas,
			Reason: planner.ReasonWaitingForReplicas}, Waiting: res.Waiting, StepsLeft: res.StepsLeft}
		msg := releaseMessage(res, params.Steps) + fmt.Sprintf("; the replicas moved back are Ready: the others give theirs up once that has held for %s", releaseSettle)
		r.reportReleaseStep(ctx, pol, rsp, res, msg)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if res.Changed {
		if err := r.applyRSP(ctx, rsp, contract.Placement{TotalReplicas: res.TotalReplicas, Clusters: res.Clusters}.Normalize()); err != nil {
			return r.releaseRetry(err)
		}
	}
	if res.Changed && res.Reason == planner.ReasonReleaseStep {
		params.Steps++
	}
	msg := releaseMessage(res, params.Steps)
	if res.Done {
		err = r.markReleased(ctx, rsp, m, &st)
	} else {
		written := contract.Placement{TotalReplicas: res.TotalReplicas, Clusters: res.Clusters}.Normalize()
		m.Applied = &written
		if res.Changed {
			m.LastChange = timePtr(now.Add(time.Second - time.Nanosecond))
		}
		params.Waiting = policystatus.Truncate(msg, 1024)
		err = r.saveRelease(ctx, rsp, m, params, &st)
	}
	if err != nil {
		return r.releaseRetry(err)
	}
	if err := r.dropLegacyAnnotation(ctx, rsp, true); err != nil {
		return ctrl.Result{}, err
	}
	r.reportReleaseStep(ctx, pol, rsp, res, msg)
	if res.Done {
		r.forget(key)
		return ctrl.Result{}, nil
	}
	// Member Pods and Nodes, KubeFedCluster Ready flips and member
	// connections queue the next pass; the resync catches the rest.
	return ctrl.Result{RequeueAfter: r.opts.Resync}, nil
}

// settled says whether res may be written now: anything but a break at
// once; a break once the same break has been ready for releaseSettle on
// this process's clock (wait: how long still).
func (r *Reconciler) settled(key client.ObjectKey, res planner.ReleaseResult, now time.Time) (wait time.Duration, ok bool) {
	mem := r.memoryOf(key)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !res.Changed || res.Reason != planner.ReasonReleaseBreak {
		mem.breakReady, mem.breakOf = time.Time{}, ""
		return 0, true
	}
	of := describe(res.Result)
	if mem.breakOf != of || mem.breakReady.IsZero() || mem.breakReady.After(now) {
		mem.breakReady, mem.breakOf = now, of
	}
	if left := releaseSettle - now.Sub(mem.breakReady); left > 0 {
		return left, false
	}
	mem.breakReady, mem.breakOf = time.Time{}, ""
	return 0, true
}

func (r *Reconciler) releaseRetry(err error) (ctrl.Result, error) {
	if errors.Is(err, errStale) {
		return ctrl.Result{RequeueAfter: staleRequeue, Priority: ptr.To(duePriority)}, nil
	}
	return ctrl.Result{}, err
}

// releaseState is the state to release from: the RSP's record unless
// released (or of an earlier RSP); else the legacy annotation, as a hint
// (an unusable one is removed, the spec left as it is); nil: nothing of
// fedfailover's to give back.
func (r *Reconciler) releaseState(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference) (stored, *contract.RebalanceState, error) {
	var st stored
	rec, err := r.getRecord(ctx, client.ObjectKeyFromObject(rsp), nil)
	if err != nil {
		return st, nil, err
	}
	if rec != nil && !rec.Spec.Released && (rec.Spec.RSPUID == "" || rec.Spec.RSPUID == string(rsp.UID)) {
		st.rec = rec
		return st, contract.StateFromRecord(&rec.Spec), nil
	}
	if rec != nil {
		st.stale = rec // replaced if the legacy annotation seeds a release
	}
	if _, ok := rsp.Annotations[contract.AnnotationRebalance]; !ok {
		return st, nil, nil
	}
	m, err := legacyHint(rsp)
	if err != nil {
		return st, nil, r.dropState(ctx, rsp, err)
	}
	st.migrated = true
	return st, m, nil
}

// saveRelease writes m to the RSP's record with the release on.
func (r *Reconciler) saveRelease(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, m *contract.RebalanceState,
	params *v1alpha1.RebalanceRelease, st *stored) error {
	spec := m.RecordSpec()
	spec.RSPUID = string(rsp.UID)
	spec.Migrated = st.migrated || (st.rec != nil && st.rec.Spec.Migrated)
	spec.Release = params.DeepCopy()
	return r.writeRecord(ctx, rsp, spec, st)
}

// markReleased marks the record released: the spec is the user's, which
// is now also what was last applied.
func (r *Reconciler) markReleased(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, m *contract.RebalanceState, st *stored) error {
	done := m.Clone()
	done.Policy, done.Members = "", nil
	base := done.Baseline.Normalize()
	done.Applied = &base
	spec := done.RecordSpec()
	spec.RSPUID = string(rsp.UID)
	spec.Migrated = st.migrated || (st.rec != nil && st.rec.Spec.Migrated)
	spec.Released = true
	return r.writeRecord(ctx, rsp, spec, st)
}

// writeRecord creates or updates the RSP's record with spec (optimistic
// lock: a record changed meanwhile is a stale pass).
func (r *Reconciler) writeRecord(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, spec v1alpha1.RebalanceRecordSpec, st *stored) error {
	rec := st.rec
	if rec == nil {
		rec = st.stale
	}
	if rec == nil {
		created, err := r.createRecord(ctx, rsp, spec)
		if err != nil {
			return err
		}
		st.rec = created
		return nil
	}
	if equality.Semantic.DeepEqual(rec.Spec, spec) {
		return nil
	}
	rec = rec.DeepCopy()
	rec.Spec = spec
	if err := r.host.Update(ctx, rec, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errStale
		}
		return fmt.Errorf("updating RebalanceRecord %s/%s: %w", rsp.Namespace, rsp.Name, err)
	}
	st.rec, st.stale = rec, nil
	return nil
}

// releaseInput gathers planner.Release's inputs: every KubeFedCluster (the
// policy that selected members may be gone; entries of members it did not
// select are the baseline's anyway), each seen as it is now.
func (r *Reconciler) releaseInput(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, m *contract.RebalanceState, maxStep int32) (planner.ReleaseInput, error) {
	w, err := r.loadWorkload(ctx, rsp)
	if err != nil {
		return planner.ReleaseInput{}, err
	}
	kfcs, err := r.members.KubeFedClusters(ctx, labels.Everything())
	if err != nil {
		return planner.ReleaseInput{}, err
	}
	in := planner.ReleaseInput{Baseline: m.Baseline.Clusters, TotalReplicas: m.Baseline.TotalReplicas,
		Current: rsp.Spec.Clusters, CurrentTotalReplicas: rsp.Spec.TotalReplicas, Members: map[string]planner.Member{}, MaxStep: maxStep,
		Assigned: map[string]int64{}}
	if w.placement != nil {
		in.Eligible = map[string]bool{}
	}
	now := r.now()
	for i := range kfcs {
		name := kfcs[i].Name
		if w.placement != nil && w.placement.Matches(labels.Set(kfcs[i].Labels)) {
			in.Eligible[name] = true
		}
		obs, err := r.observe(ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", name)), name, kubefedhealth.Of(&kfcs[i], now), rsp.Namespace, w)
		if err != nil {
			return planner.ReleaseInput{}, err
		}
		in.Members[name] = releaseMember(obs)
		if obs.Healthy && !obs.Unknown {
			in.Assigned[name] = assignedOf(obs)
		}
	}
	return in, nil
}

// releaseMember is a member as a release sees it: now, without timers.
// Failed only when kubefed reports it not Ready; unobserved when
// fedfailover cannot read it (kubefed Ready: it may well run its replicas,
// but their readiness and the member's room cannot be known); exhausted
// while a replica of the workload is Unschedulable there.
func releaseMember(obs observation) planner.Member {
	switch {
	case !obs.KubefedReady:
		return planner.Member{State: planner.Failed}
	case obs.Unknown || !obs.Healthy:
		return planner.Member{State: planner.Healthy, KubefedReady: true, Unobserved: true}
	case obs.Unschedulable:
		return planner.Member{State: planner.Exhausted, KubefedReady: true, Running: obs.Running}
	}
	return planner.Member{State: planner.Healthy, KubefedReady: true, Running: obs.Running, Fits: max(obs.Fits, 0)}
}

// assignedOf is a member's replicas as planner.ReleaseInput.Assigned reads
// them: -1 (never what a spec assigns) until the workload's controller has
// seen its spec; a member without the workload has none.
func assignedOf(obs observation) int64 {
	switch {
	case obs.Assigned < 0:
		return 0
	case !obs.AssignedObserved:
		return -1
	}
	return obs.Assigned
}

// releaseMessage says what a release did and what it waits for, e.g.
// "releasing step 2 of 3: member2 is given 4 of its 3 ..." or
// "releasing (2 steps to go): member2 is not Ready in kubefed; its pin
// stays (0 of its 3 replicas)".
func releaseMessage(res planner.ReleaseResult, steps int32) string {
	if res.Done {
		return "released: the user's spec is back (" + describe(res.Result) + ")"
	}
	var head string
	switch {
	case steps > 0:
		head = fmt.Sprintf("releasing step %d of %d", steps, int(steps)+res.StepsLeft)
	case res.StepsLeft > 0:
		head = fmt.Sprintf("releasing (%d steps to go)", res.StepsLeft)
	default:
		head = "releasing"
	}
	var parts []string
	switch res.Reason {
	case planner.ReasonReleaseStep:
		parts = append(parts, "make before break, totalReplicas raised to "+fmt.Sprint(res.TotalReplicas)+": "+describe(res.Result))
	case planner.ReasonReleaseBreak:
		parts = append(parts, "the replicas moved back are Ready, the others give theirs up: "+describe(res.Result))
	case planner.ReasonMemberFailed:
		parts = append(parts, "a member kubefed reports not Ready held replicas: moved as kubefed alone would: "+describe(res.Result))
	case planner.ReasonTooManyMembersFailed:
		parts = append(parts, "too many members failed at once: nothing moves (federation guard)")
	case planner.ReasonNoCapacityAnywhere, planner.ReasonMembersUnobserved:
		parts = append(parts, "no member known to have room: nothing moves ("+res.Reason+")")
	}
	for _, w := range res.Waiting {
		switch w.Reason {
		case planner.WaitNotReady:
			parts = append(parts, fmt.Sprintf("%s is not Ready in kubefed; its pin stays (%d of its %d replicas)", w.Member, w.Has, w.Share))
		case planner.WaitUnobserved:
			parts = append(parts, fmt.Sprintf("%s cannot be read by fedfailover; its pin stays (%d of its %d replicas)", w.Member, w.Has, w.Share))
		case planner.WaitUnschedulable:
			parts = append(parts, fmt.Sprintf("%s has Unschedulable replicas; its pin stays (%d of its %d replicas)", w.Member, w.Has, w.Share))
		case planner.WaitNoRoom:
			parts = append(parts, fmt.Sprintf("%s is out of room (%d more fit); its pin stays (%d of its %d replicas)", w.Member, w.Fits, w.Has, w.Share))
		case planner.WaitReplicas:
			parts = append(parts, fmt.Sprintf("waiting for %s's replicas to be Ready (%d of %d)", w.Member, w.Ready, w.Has))
		case planner.WaitKubefed:
			parts = append(parts, fmt.Sprintf("waiting for kubefed to give %s its %d replicas", w.Member, w.Has))
		}
	}
	if len(parts) == 0 {
		return head
	}
	return head + ": " + strings.Join(parts, "; ")
}

// reportReleaseStep reports a release pass: an event on the RSP (and on
// the policy while it exists) when the message changes, the policy's
// status entry while the policy exists.
func (r *Reconciler) reportReleaseStep(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference,
	res planner.ReleaseResult, msg string) {
	key := client.ObjectKeyFromObject(rsp)
	mem := r.memoryOf(key)
	r.mu.Lock()
	changed := mem.lastReport != msg
	mem.lastReport, mem.held = msg, ""
	r.mu.Unlock()
	if pol != nil && !res.Done {
		r.store.Set(key, pol.Name, rspEntry{status: v1alpha1.RebalanceStatus{Namespace: rsp.Namespace, Name: rsp.Name, Shifted: true,
			Reason: v1alpha1.ReasonReleasing}, show: true, placement: v1alpha1.ReasonReleasing, detail: key.String() + ": " + msg})
	}
	if res.Changed {
		metrics.Rebalances.WithLabelValues(res.Reason).Inc()
	}
	if !changed {
		return
	}
	reason, action, evType := v1alpha1.ReasonReleasing, ActionRelease, corev1.EventTypeNormal
	switch {
	case res.Done:
		reason = ReasonBaselineRestored
	case res.Changed:
		action = ActionRestore
	case len(res.Waiting) > 0 && res.Waiting[0].Reason != planner.WaitReplicas:
		evType = corev1.EventTypeWarning
	}
	r.reportRelease(ctx, pol, rsp, reason, action, evType, msg)
}

// reportRelease is report for a release, whose policy may be gone (pol nil).
func (r *Reconciler) reportRelease(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, reason, action, evType, msg string) {
	ctrl.LoggerFrom(ctx).Info("Release: "+msg, "reason", reason, "action", action)
	if pol == nil {
		r.recorder.Eventf(rsp, nil, evType, reason, action, "%s", msg)
		return
	}
	r.recorder.Eventf(rsp, pol, evType, reason, action, "%s", msg)
	r.recorder.Eventf(pol, rsp, evType, reason, action, "%s/%s: %s", rsp.Namespace, rsp.Name, msg)
	r.store.Decide(pol.Name, v1alpha1.Decision{
		Time: metav1.NewTime(r.now()), Object: "ReplicaSchedulingPreference/" + rsp.Namespace + "/" + rsp.Name,
		Action: action, Reason: reason, Message: policystatus.Truncate(msg, 512),
	})
}
