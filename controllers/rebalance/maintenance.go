package rebalance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
	"github.com/fedfailover/fedfailover/internal/policystatus"
)

// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=membermaintenances,verbs=get;list;watch
// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=membermaintenances/status,verbs=get;patch

// Planned maintenance of a member (docs/rebalance.md): a MemberMaintenance
// names a member to empty. This controller decides whether it is accepted
// (planner.AdmitMaintenance, from the policies' published N+1 figures) and
// reports its progress; the drain itself is the rebalance controller's
// ordinary pass over each RSP, the member read as Draining while an
// accepted MemberMaintenance names it (planner, drain.go). Deleting the
// MemberMaintenance ends the maintenance: the next passes fail back.

// accepted: the maintenance is accepted for its current generation and
// not being deleted.
func accepted(mm *v1alpha1.MemberMaintenance) bool {
	c := meta.FindStatusCondition(mm.Status.Conditions, v1alpha1.ConditionAccepted)
	return mm.DeletionTimestamp == nil && c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == mm.Generation
}

// drainingMembers are the members an accepted MemberMaintenance names.
func (r *Reconciler) drainingMembers(ctx context.Context) (map[string]bool, error) {
	var list v1alpha1.MemberMaintenanceList
	if err := r.host.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing MemberMaintenances: %w", err)
	}
	out := map[string]bool{}
	for i := range list.Items {
		if accepted(&list.Items[i]) {
			out[list.Items[i].Spec.Member] = true
		}
	}
	return out, nil
}

// drainStore keeps, per member under maintenance, each RSP's drain as the
// last pass over it planned it.
type drainStore struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string]planner.DrainProgress
}

// set replaces the drains of one RSP (nil: it drains nothing).
func (d *drainStore) set(key types.NamespacedName, drains map[string]planner.DrainProgress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(drains) == 0 {
		delete(d.m, key)
		return
	}
	if d.m == nil {
		d.m = map[types.NamespacedName]map[string]planner.DrainProgress{}
	}
	d.m[key] = drains
}

// of is the drain of member, per RSP.
func (d *drainStore) of(member string) map[types.NamespacedName]planner.DrainProgress {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[types.NamespacedName]planner.DrainProgress{}
	for k, drains := range d.m {
		if p, ok := drains[member]; ok {
			out[k] = p
		}
	}
	return out
}

// recordDrains keeps the drain of each draining member of the pass, as
// the RSP is after it (res written, or kept; in dry-run as it is: nothing
// was written).
func (r *Reconciler) recordDrains(key types.NamespacedName, in planner.Input, res planner.Result, dry bool) {
	after := in
	if !dry {
		after.Current, after.CurrentTotalReplicas = res.Clusters, res.TotalReplicas
	}
	drains := map[string]planner.DrainProgress{}
	for n, m := range in.Members {
		if m.Draining {
			drains[n] = planner.DrainProgressOf(after, n)
		}
	}
	r.drains.set(key, drains)
}

// settling is the RSP kept as it is while a break settles: still raised
// above the user's total (the break lowers it to res.TotalReplicas).
func settling(rsp *fedschedv1a1.ReplicaSchedulingPreference, res planner.Result) planner.Result {
	return planner.Result{Clusters: rsp.Spec.Clusters, TotalReplicas: rsp.Spec.TotalReplicas, TemporaryTotal: rsp.Spec.TotalReplicas > res.TotalReplicas,
		Shifted: true, Unplaced: res.Unplaced, Reason: planner.ReasonWaitingForReplicas}
}

// maintenance reconciles MemberMaintenances: acceptance, progress,
// conditions, events and metrics. It writes their status only.
type maintenance struct {
	r *Reconciler
	// progressEvery is how often the progress of a drain is read again.
	progressEvery time.Duration
}

// Reconcile decides a refused (or new) maintenance again, and reports the
// progress of an accepted one.
func (m *maintenance) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mm := &v1alpha1.MemberMaintenance{}
	if err := m.r.host.Get(ctx, req.NamespacedName, mm); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.DeleteMaintenance(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if mm.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", mm.Spec.Member))
	orig := mm.DeepCopy()
	published, err := m.published(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	acceptance, err := m.admit(ctx, mm, published)
	if err != nil {
		return ctrl.Result{}, err
	}
	status := progressStatus(mm, acceptance, drainsOf(mm.Spec.Member, m.r.drains.of(mm.Spec.Member), published))
	setMaintenanceGauges(mm.Name, mm.Spec.Member, status) // every pass: a restarted manager has none yet
	if equality.Semantic.DeepEqual(orig.Status, status) {
		return m.next(mm), nil
	}
	mm.Status = status
	if err := m.r.host.Status().Patch(ctx, mm, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{RequeueAfter: staleRequeue}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing the status of MemberMaintenance %s: %w", mm.Name, err)
	}
	m.report(ctx, orig, mm)
	return m.next(mm), nil
}

// next: a refused maintenance is decided again at the resync, a drain's
// progress read again shortly.
func (m *maintenance) next(mm *v1alpha1.MemberMaintenance) ctrl.Result {
	if accepted(mm) && !meta.IsStatusConditionTrue(mm.Status.Conditions, v1alpha1.ConditionDrained) {
		return ctrl.Result{RequeueAfter: m.progressEvery}
	}
	return ctrl.Result{RequeueAfter: m.r.opts.Resync}
}

// admit is the Accepted condition: kept once True for this generation (a
// drain is not stopped half-way because it used the room it was accepted
// on); else decided from the published N+1 figures.
func (m *maintenance) admit(ctx context.Context, mm *v1alpha1.MemberMaintenance, published []v1alpha1.RSPReadiness) (metav1.Condition, error) {
	if accepted(mm) {
		return *meta.FindStatusCondition(mm.Status.Conditions, v1alpha1.ConditionAccepted), nil
	}
	cond := metav1.Condition{Type: v1alpha1.ConditionAccepted, ObservedGeneration: mm.Generation}
	kfcs, err := m.r.members.KubeFedClusters(ctx, labels.Everything())
	if err != nil {
		return cond, err
	}
	if !slices.ContainsFunc(kfcs, func(k kubefedv1beta1.KubeFedCluster) bool { return k.Name == mm.Spec.Member }) {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonMaintenanceNoMember
		cond.Message = fmt.Sprintf("no KubeFedCluster is named %q (spec.member)", mm.Spec.Member)
		return cond, nil
	}
	draining, err := m.r.drainingMembers(ctx)
	if err != nil {
		return cond, err
	}
	adm := planner.AdmitMaintenance(mm.Spec.Member, mm.Spec.Force, published, draining)
	cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, adm.Reason, adm.Message
	if adm.Accept {
		cond.Status = metav1.ConditionTrue
	}
	return cond, nil
}

// published is every rebalancing policy's status.failoverReadiness: the
// managed RSPs and what each places on each member.
func (m *maintenance) published(ctx context.Context) ([]v1alpha1.RSPReadiness, error) {
	var pols v1alpha1.FailoverPolicyList
	if err := m.r.host.List(ctx, &pols); err != nil {
		return nil, fmt.Errorf("listing FailoverPolicies: %w", err)
	}
	var out []v1alpha1.RSPReadiness
	for i := range pols.Items {
		if pols.Items[i].Spec.Rebalance != nil {
			out = append(out, pols.Items[i].Status.FailoverReadiness...)
		}
	}
	return out, nil
}

// drainsOf is the drain of member per RSP: as the passes planned it, and,
// for a managed RSP that places replicas on the member but no pass has
// drained yet (just accepted), all of them still left: a drain is never
// reported done before every RSP was seen drained.
func drainsOf(member string, planned map[types.NamespacedName]planner.DrainProgress, published []v1alpha1.RSPReadiness) map[types.NamespacedName]planner.DrainProgress {
	out := planned
	for _, st := range published {
		key := types.NamespacedName{Namespace: st.Namespace, Name: st.Name}
		if _, ok := out[key]; ok {
			continue
		}
		for _, mr := range st.Members {
			if mr.Name == member && mr.Replicas > 0 {
				out[key] = planner.DrainProgress{Share: int64(mr.Replicas), Left: int64(mr.Replicas)}
			}
		}
	}
	return out
}

// progressStatus is the status for the acceptance and the drains of the
// member's RSPs.
func progressStatus(mm *v1alpha1.MemberMaintenance, acceptance metav1.Condition, drains map[types.NamespacedName]planner.DrainProgress) v1alpha1.MemberMaintenanceStatus {
	st := v1alpha1.MemberMaintenanceStatus{ObservedGeneration: mm.Generation, Conditions: slices.Clone(mm.Status.Conditions)}
	acceptance.Message = policystatus.Truncate(acceptance.Message, policystatus.MaxConditionMessage)
	meta.SetStatusCondition(&st.Conditions, acceptance)
	drained := metav1.Condition{Type: v1alpha1.ConditionDrained, Status: metav1.ConditionFalse, ObservedGeneration: mm.Generation,
		Reason: v1alpha1.ReasonNotAccepted, Message: "the request is not accepted: " + acceptance.Message}
	if acceptance.Status == metav1.ConditionTrue {
		var sum planner.DrainProgress
		pendingOn := map[string]bool{}
		keys := make([]types.NamespacedName, 0, len(drains))
		for k := range drains {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			p := drains[k]
			sum.Share += p.Share
			sum.Left += p.Left
			sum.Moved += p.Moved
			sum.Pending += p.Pending
			sum.WaitingForRoom += p.WaitingForRoom
			for _, n := range p.PendingOn {
				pendingOn[n] = true
			}
			if len(st.RSPs) < 256 && (p.Left > 0 || p.Pending > 0 || p.Share > 0) {
				st.RSPs = append(st.RSPs, v1alpha1.MaintenanceRSP{Namespace: k.Namespace, Name: k.Name, Left: clamp(p.Left), Share: clamp(p.Share),
					Pending: clamp(p.Pending), WaitingForRoom: clamp(p.WaitingForRoom)})
			}
		}
		st.Share, st.Moved, st.Pending, st.WaitingForRoom = clamp(sum.Share), clamp(sum.Moved), clamp(sum.Pending), clamp(sum.WaitingForRoom)
		st.Progress = progressMessage(mm.Spec.Member, sum, sortedKeys(pendingOn))
		switch {
		case sum.Left == 0 && sum.Pending == 0:
			drained.Status, drained.Reason = metav1.ConditionTrue, v1alpha1.ReasonMemberDrained
		case sum.Left <= sum.WaitingForRoom && sum.Pending == 0:
			drained.Reason = v1alpha1.ReasonWaitingForRoom
		default:
			drained.Reason = v1alpha1.ReasonDraining
		}
		drained.Message = st.Progress
	}
	meta.SetStatusCondition(&st.Conditions, drained)
	return st
}

// progressMessage is e.g. "12 of 30 replicas moved off member1, 3 not
// Ready yet on member2, 3 waiting for room".
func progressMessage(member string, p planner.DrainProgress, pendingOn []string) string {
	msg := fmt.Sprintf("%d of %d replicas moved off %s", p.Moved, max(p.Share, p.Moved+p.Left), member)
	if p.Pending > 0 {
		msg += fmt.Sprintf(", %d not Ready yet on %s", p.Pending, strings.Join(pendingOn, ", "))
	}
	if p.WaitingForRoom > 0 {
		msg += fmt.Sprintf(", %d waiting for room on the other members", p.WaitingForRoom)
	}
	if p.Left == 0 && p.Pending == 0 {
		msg += ": drained"
	}
	return msg
}

func clamp(v int64) int32 { return int32(min(max(v, 0), 1<<31-1)) }

// setMaintenanceGauges sets the maintenance's series from its status.
func setMaintenanceGauges(name, member string, st v1alpha1.MemberMaintenanceStatus) {
	accepted := meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionAccepted)
	metrics.MaintenanceRefused.WithLabelValues(name, member).Set(gaugeValue(!accepted))
	if !accepted {
		metrics.MaintenanceReplicas.DeletePartialMatch(prometheus.Labels{"maintenance": name})
		return
	}
	for state, v := range map[string]int32{"share": st.Share, "moved": st.Moved, "pending": st.Pending, "waiting_for_room": st.WaitingForRoom} {
		metrics.MaintenanceReplicas.WithLabelValues(name, member, state).Set(float64(v))
	}
}

// report emits an event on each transition of a condition.
func (m *maintenance) report(ctx context.Context, before, after *v1alpha1.MemberMaintenance) {
	for _, c := range after.Status.Conditions {
		old := meta.FindStatusCondition(before.Status.Conditions, c.Type)
		if old != nil && old.Status == c.Status && old.Reason == c.Reason {
			continue
		}
		evType := corev1.EventTypeNormal
		if c.Status == metav1.ConditionFalse && c.Type == v1alpha1.ConditionAccepted {
			evType = corev1.EventTypeWarning
		}
		ctrl.LoggerFrom(ctx).Info("Maintenance: "+c.Message, "condition", c.Type, "reason", c.Reason)
		m.r.recorder.Eventf(after, nil, evType, c.Reason, c.Type, "%s", c.Message)
	}
}

// maintenanceChanged passes what changes the drain: a maintenance created,
// deleted, or accepted (or no longer).
var maintenanceChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, okO := e.ObjectOld.(*v1alpha1.MemberMaintenance)
	n, okN := e.ObjectNew.(*v1alpha1.MemberMaintenance)
	return !okO || !okN || accepted(o) != accepted(n) || o.Spec.Member != n.Spec.Member
}}
