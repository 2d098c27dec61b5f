package rebalance

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// Decision actions.
const (
	ActionShift           = "ShiftedWeights"
	ActionRestore         = "RestoredBaseline"
	ActionHold            = "Held"
	ActionRelease         = "Released"
	ActionBaselineChanged = "BaselineChanged"
	ActionSuspend         = "Suspended"
	ActionResume          = "Resumed"
	ActionBackoff         = "BackedOff"
	ActionStateCorrected  = "CorrectedState"
	ActionStateMigrated   = "MigratedState"
)

// Event and decision reasons besides the planner's.
const (
	ReasonAdoptedUserEdit  = "AdoptedUserEdit"
	ReasonBaselineRestored = "RestoredBaseline"
	// ReasonStateReset: the RSP's legacy rebalance annotation could not be
	// used; the current spec became the baseline.
	ReasonStateReset = "StateReset"
	// ReasonStateClamped: a recorded time later than now was taken as now,
	// or a backoff level above the cap as the cap.
	ReasonStateClamped = "StateClamped"
	// ReasonStateMigrated: the legacy annotation's state moved into the
	// RSP's RebalanceRecord.
	ReasonStateMigrated = "StateMigrated"
	// ReasonRebalanceResumed: the federation guard no longer holds the RSP.
	ReasonRebalanceResumed = "RebalanceResumed"
	// ReasonFailbackBackoff: a member ran out of capacity right after a
	// failback; its next failback waits longer.
	ReasonFailbackBackoff = "FailbackBackoff"
)

// reportPlan is the one call for a written (or, in dry-run, planned)
// change: log, events on the RSP and the policy, decision, metric.
func (r *Reconciler) reportPlan(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, res planner.Result, dry bool) {
	action := ActionShift
	if !res.Shifted {
		action = ActionRestore
	}
	msg := fmt.Sprintf("%s: %s", res.Reason, describe(res))
	r.report(ctx, pol, rsp, "", res.Reason, action, msg, dry)
	metrics.Rebalances.WithLabelValues(res.Reason).Inc()
}

func (r *Reconciler) report(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, cluster, reason, action, msg string, dry bool) {
	if dry {
		msg = "dry-run, not written: " + msg
	}
	ctrl.LoggerFrom(ctx).Info("Rebalance: "+msg, "reason", reason, "action", action)
	evType := corev1.EventTypeNormal
	switch reason {
	case planner.ReasonMemberFailed, planner.ReasonMemberUnreachable, planner.ReasonCapacityExhausted, planner.ReasonCapacityPredicted, planner.ReasonInsufficientCapacity,
		ReasonStateReset, ReasonStateClamped, v1alpha1.ReasonStateMissing, ReasonFailbackBackoff, planner.ReasonTooManyMembersFailed, planner.ReasonNoCapacityAnywhere,
		v1alpha1.ReasonMemberFailureUnconfirmed:
		evType = corev1.EventTypeWarning
	}
	r.recorder.Eventf(rsp, pol, evType, reason, action, "%s", msg)
	r.recorder.Eventf(pol, rsp, evType, reason, action, "%s/%s: %s", rsp.Namespace, rsp.Name, msg)
	r.store.Decide(pol.Name, v1alpha1.Decision{
		Time: metav1.NewTime(r.now()), Cluster: cluster,
		Object: "ReplicaSchedulingPreference/" + rsp.Namespace + "/" + rsp.Name,
		Action: action, Reason: reason, Message: policystatus.Truncate(msg, 512), DryRun: dry,
	})
}

// describe lists the placement per member, e.g. "member1=6 member2=0 (total 6)".
func describe(res planner.Result) string {
	var b strings.Builder
	for _, n := range sortedKeys(res.Placement) {
		fmt.Fprintf(&b, "%s=%d ", n, res.Placement[n])
	}
	fmt.Fprintf(&b, "(totalReplicas %d", res.TotalReplicas)
	if res.Unplaced > 0 {
		fmt.Fprintf(&b, ", %d beyond known room", res.Unplaced)
	}
	b.WriteString(")")
	return b.String()
}

// record publishes the RSP's state: policy status entry and weights.
func (r *Reconciler) record(pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, in planner.Input, res planner.Result, m *contract.RebalanceState) {
	key := client.ObjectKeyFromObject(rsp)
	st := v1alpha1.RebalanceStatus{Namespace: rsp.Namespace, Name: rsp.Name, Shifted: res.Shifted,
		Reason: res.Reason, LastChangeTime: m.LastChange}
	// Listed while shifted, or while something keeps it from its baseline.
	show := res.Shifted || (res.Reason != planner.ReasonBalanced && res.Reason != planner.ReasonNoMembers)
	placement, detail := placementOf(key, in, res)
	if pol.Spec.DryRun && detail != "" {
		detail += " (dry run: nothing written, the RSP is left as it is)"
	}
	suspended, suspendedDetail := r.suspensionOf(key, in, res)
	// N+1 readiness, from this pass's observations: no read of its own.
	readiness := planner.ReadinessStatus(rsp.Namespace, rsp.Name, planner.ReadinessInputOf(in))
	r.store.Set(key, pol.Name, rspEntry{status: st, show: show, placement: placement, detail: detail,
		suspended: suspended, suspendedDetail: suspendedDetail, readiness: &readiness})
	r.publishShortfalls(key, pol.Name, &readiness)
	for reason, n := range suspendedCounts(r.store, pol.Name) {
		metrics.RebalanceSuspended.WithLabelValues(pol.Name, reason).Set(gaugeValue(n > 0))
	}
	metrics.RSPShifted.WithLabelValues(rsp.Namespace, rsp.Name).Set(gaugeValue(res.Shifted))
	metrics.RSPGuardHeld.WithLabelValues(rsp.Namespace, rsp.Name).Set(gaugeValue(res.Reason == planner.ReasonTooManyMembersFailed))
	for n, mem := range in.Members {
		metrics.RebalanceFailbackBackoff.WithLabelValues(rsp.Namespace, rsp.Name, n).Set(float64(mem.Backoff))
	}
	for n, p := range res.Clusters {
		if n != planner.Wildcard {
			metrics.RSPWeight.WithLabelValues(rsp.Namespace, rsp.Name, n).Set(float64(p.Weight))
		}
	}
}

// placementOf classifies a plan for the Rebalancing condition: at the
// baseline; shifted while a member is failed or out of capacity; moved off
// a member under maintenance; failing
// back once every member is healthy again (stabilizing or stepping back).
func placementOf(key types.NamespacedName, in planner.Input, res planner.Result) (string, string) {
	if !res.Shifted {
		return v1alpha1.ReasonAtBaseline, ""
	}
	var down []string
	for _, n := range sortedKeys(in.Members) {
		if s := in.Members[n].State; s != planner.Healthy {
			down = append(down, fmt.Sprintf("%s %s", n, s))
		}
	}
	if len(down) > 0 {
		return v1alpha1.ReasonShifted, fmt.Sprintf("%s: shifted (%s) away from %s: %s", key, res.Reason, strings.Join(down, ", "), describe(res))
	}
	var draining []string
	for _, n := range sortedKeys(in.Members) {
		if in.Members[n].Draining {
			draining = append(draining, n)
		}
	}
	if len(draining) > 0 {
		return v1alpha1.ReasonMemberMaintenance, fmt.Sprintf("%s: moved (%s) off %s, under maintenance: %s", key, res.Reason, strings.Join(draining, ", "), describe(res))
	}
	return v1alpha1.ReasonFailingBack, fmt.Sprintf("%s: every member healthy, returning to the baseline (%s): %s", key, res.Reason, describe(res))
}

// suspensionOf says whether a safety rule holds the RSP (its reason, ""
// if not) and names the members behind it: the federation guard, no room
// anywhere, or replicas left on members fedfailover alone sees failed.
func (r *Reconciler) suspensionOf(key types.NamespacedName, in planner.Input, res planner.Result) (string, string) {
	var reason string
	switch res.Reason {
	case planner.ReasonTooManyMembersFailed:
		reason = v1alpha1.ReasonTooManyMembersFailed
	case planner.ReasonNoCapacityAnywhere:
		reason = v1alpha1.ReasonNoCapacityAnywhere
	default:
		return r.unconfirmedOf(key, in, res)
	}
	var failed, unconfirmed, failing, full []string
	for _, n := range sortedKeys(in.Members) {
		switch m := in.Members[n]; {
		case m.State == planner.Failed:
			failed = append(failed, n)
		case m.Unconfirmed:
			unconfirmed = append(unconfirmed, n)
		case m.Failing:
			failing = append(failing, n)
		case m.State == planner.Exhausted || m.Fits <= 0:
			full = append(full, n)
		}
	}
	msg := fmt.Sprintf("%s: %d of %d members failed (%s)", key, len(failed), len(in.Members), strings.Join(failed, ", "))
	if len(failing) > 0 {
		msg += fmt.Sprintf(", %d failing, not failed yet (%s)", len(failing), strings.Join(failing, ", "))
	}
	if len(unconfirmed) > 0 {
		msg += fmt.Sprintf(", %d unreachable to fedfailover alone, kubefed does not confirm it (%s)", len(unconfirmed), strings.Join(unconfirmed, ", "))
	}
	if reason == v1alpha1.ReasonNoCapacityAnywhere {
		msg += fmt.Sprintf(", no room in %s", strings.Join(full, ", "))
	}
	return reason, msg + ": nothing shifted, kubefed keeps its placement"
}

// unconfirmedOf says whether replicas of the RSP stay on members that only
// fedfailover sees failed (planner.Member.Unconfirmed), and names them with
// kubefed's verdict: nothing is moved off them until kubefed agrees.
func (r *Reconciler) unconfirmedOf(key types.NamespacedName, in planner.Input, res planner.Result) (string, string) {
	var parts []string
	for _, n := range sortedKeys(in.Members) {
		if !in.Members[n].Unconfirmed || res.Placement[n] == 0 {
			continue
		}
		why := "kubefed reports it Ready"
		if v, ok := r.kubefedViews.Load(n); ok {
			why = v.(kubefedhealth.View).Message
		}
		parts = append(parts, fmt.Sprintf("%s (%d replicas) is unreachable to fedfailover for over clusterFailedAfter (%s), but %s",
			n, res.Placement[n], in.Spec.ClusterFailedAfter.Get(), why))
	}
	if len(parts) == 0 {
		return "", ""
	}
	return v1alpha1.ReasonMemberFailureUnconfirmed, fmt.Sprintf("%s: %s: nothing is moved off it until kubefed agrees "+
		"(fedfailover's own view alone is no proof of failure; see status.members for why it cannot connect)", key, strings.Join(parts, "; "))
}

// reportSuspension emits an event when the federation guard starts or
// stops holding the RSP (or changes its reason): transitions only.
func (r *Reconciler) reportSuspension(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference,
	mem *memory, in planner.Input, res planner.Result) {
	reason, detail := r.suspensionOf(client.ObjectKeyFromObject(rsp), in, res)
	r.mu.Lock()
	prev := mem.suspended
	mem.suspended = reason
	r.mu.Unlock()
	switch {
	case reason == prev:
	case reason != "":
		r.report(ctx, pol, rsp, "", reason, ActionSuspend, "rebalance suspended: "+detail, pol.Spec.DryRun)
	default:
		r.report(ctx, pol, rsp, "", ReasonRebalanceResumed, ActionResume,
			"rebalance resumed: the federation guard no longer holds it ("+prev+" is over)", pol.Spec.DryRun)
	}
}

// hold leaves an RSP exactly as it is because the policy that manages it
// has selectors that cannot be parsed: the policy's status says so, and an
// event on each RSP the first time.
func (r *Reconciler) hold(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, reason string, why error) {
	key := client.ObjectKeyFromObject(rsp)
	st := v1alpha1.RebalanceStatus{Namespace: rsp.Namespace, Name: rsp.Name, Reason: reason}
	if m, err := r.shownState(ctx, rsp); err == nil && m != nil {
		st.Shifted, st.LastChangeTime = !m.Baseline.Equal(specPlacement(rsp)), m.LastChange
	}
	if reason == v1alpha1.ReasonStateMissing {
		st.Shifted = true // fedfailover's pins are on the spec
	}
	msg := fmt.Sprintf("left as it is, neither planned nor released: %s", why)
	r.store.Set(key, pol.Name, rspEntry{status: st, show: true, placement: v1alpha1.ReasonRebalanceHeld, detail: key.String() + ": " + msg})
	r.dropShortfalls(key) // not assessed while held
	mem := r.memoryOf(key)
	r.mu.Lock()
	first := mem.held != msg
	mem.held = msg
	// Nothing is observed while held: the onsets start again from the
	// first pass after it.
	mem.seen = nil
	r.mu.Unlock()
	if first {
		r.report(ctx, pol, rsp, "", reason, ActionHold, msg, pol.Spec.DryRun)
	}
}

// publishShortfalls keeps fedfailover_failover_shortfall_replicas of the
// RSP as its readiness says: a series per member whose figure is known,
// under the policy that manages the RSP; the series of members gone, of
// figures no longer known or of another policy are deleted (only those:
// a series deleted and set again could miss a scrape, and restart the
// alert's wait).
func (r *Reconciler) publishShortfalls(key types.NamespacedName, policy string, st *v1alpha1.RSPReadiness) {
	next := map[string]string{}
	for _, m := range st.Members {
		if m.Shortfall != nil {
			next[m.Name] = policy
			metrics.FailoverShortfall.WithLabelValues(policy, key.Namespace, key.Name, m.Name).Set(float64(*m.Shortfall))
		}
	}
	mem := r.memoryOf(key)
	r.mu.Lock()
	prev := mem.shortfalls
	mem.shortfalls = next
	r.mu.Unlock()
	for member, pol := range prev {
		if next[member] != pol {
			metrics.FailoverShortfall.DeleteLabelValues(pol, key.Namespace, key.Name, member)
		}
	}
}

// dropShortfalls deletes the RSP's readiness series: it is not assessed
// (held, released, gone).
func (r *Reconciler) dropShortfalls(key types.NamespacedName) {
	metrics.FailoverShortfall.DeletePartialMatch(map[string]string{"namespace": key.Namespace, "rsp": key.Name})
	r.mu.Lock()
	if m := r.mem[key]; m != nil {
		m.shortfalls = nil
	}
	r.mu.Unlock()
}

// gaugeValue is a boolean as a gauge value.
func gaugeValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// onsetInfo is the earliest onset of a failed or exhausted member.
type onsetInfo struct {
	since time.Time
	why   string
}

func (o *onsetInfo) add(a assessment) {
	if a.Since.IsZero() || (!o.since.IsZero() && !a.Since.Before(o.since)) {
		return
	}
	o.since, o.why = a.Since, planner.ReasonCapacityExhausted
	if a.Member.State == planner.Failed {
		o.why = planner.ReasonMemberFailed
	}
}

// observeRecovery measures, once per onset, the time until the replicas
// running on healthy members reach totalReplicas again.
func (r *Reconciler) observeRecovery(mem *memory, in planner.Input, onset onsetInfo, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !onset.since.IsZero() && onset.since.After(mem.onsetDone) && mem.onset.IsZero() {
		mem.onset, mem.onsetWhy = onset.since, onset.why
	}
	if mem.onset.IsZero() {
		return
	}
	var running int64
	for _, m := range in.Members {
		if m.State != planner.Failed {
			running += m.Running
		}
	}
	if running >= int64(in.TotalReplicas) {
		metrics.RebalanceSeconds.WithLabelValues(mem.onsetWhy).Observe(now.Sub(mem.onset).Seconds())
		mem.onsetDone, mem.onset = mem.onset, time.Time{}
	}
}
