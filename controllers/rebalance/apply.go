package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// errStale: the RSP changed since it was read; plan again on the fresh one.
var errStale = errors.New("ReplicaSchedulingPreference changed while planning")

// FieldOwner is the server-side apply field manager of the RSP fields the
// controller writes, spec.clusters and spec.totalReplicas (and the writer
// of RebalanceRecords). Its field ownership tells fedfailover's own pins
// from the user's spec (owners.go, loadState).
const FieldOwner = "fedfailover"

// apply writes the plan to the RSP and the state to its RebalanceRecord.
// The RSP is written only when the plan changes it: every apply carries
// all owned fields (a field left out of an apply is removed), and the RSP's
// resourceVersion, so a plan made on a stale or concurrently edited RSP is
// rejected and made again. The record holds the baseline before any shift
// is written, and what was written after it.
func (r *Reconciler) apply(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference,
	m *contract.RebalanceState, res planner.Result, mem *memory, st *stored) error {
	now := r.now()
	if pol.Spec.DryRun {
		// Nothing is written, so nothing was applied: report each new plan once.
		r.mu.Lock()
		mem.dryMarks = m.Clone()
		fp := fmt.Sprintf("%v|%d|%s", res.Clusters, res.TotalReplicas, res.Reason)
		report := res.Changed && fp != mem.lastReport
		if res.Changed {
			mem.lastReport = fp
		}
		r.mu.Unlock()
		if report {
			r.reportPlan(ctx, pol, rsp, res, true)
		}
		return nil
	}
	if res.Changed {
		if st.rec == nil {
			// No shift without the baseline on record first.
			if err := r.saveRecord(ctx, rsp, m.Clone(), st, mem); err != nil {
				return err
			}
		}
		written := contract.Placement{TotalReplicas: res.TotalReplicas, Clusters: res.Clusters}.Normalize()
		// The record keeps whole seconds: round up, so minInterval
		// counted from it is never shorter than the policy asks.
		m.Applied, m.LastChange = &written, timePtr(now.Add(time.Second-time.Nanosecond))
		markFailback(m, res.FailedBack, now)
		if err := r.applyRSP(ctx, rsp, written); err != nil {
			return err
		}
	}
	if err := r.saveRecord(ctx, rsp, m, st, mem); err != nil {
		return err
	}
	if err := r.dropLegacyAnnotation(ctx, rsp, st.migrated); err != nil {
		return err
	}
	if res.Changed {
		r.sawFailback(mem, m, res.FailedBack)
		r.reportPlan(ctx, pol, rsp, res, false)
	}
	return nil
}

// sawFailback keeps the failbacks just written among this process's own
// sightings.
func (r *Reconciler) sawFailback(mem *memory, m *contract.RebalanceState, members []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mem.seen == nil && len(members) > 0 {
		mem.seen = map[string]contract.MemberTimers{}
	}
	for _, n := range members {
		t := mem.seen[n]
		t.LastFailback = m.Members[n].LastFailback
		mem.seen[n] = t
	}
}

// dropState removes an unusable legacy rebalance annotation from an RSP no
// policy manages, leaving its spec as it is: nothing recorded can be
// trusted. A merge patch, because whoever garbled it may own the field.
func (r *Reconciler) dropState(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, why error) error {
	patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q,"annotations":{%q:null}}}`, rsp.ResourceVersion, contract.AnnotationRebalance)
	if err := r.host.Patch(ctx, rsp, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsConflict(err) {
			return errStale
		}
		return fmt.Errorf("removing annotation %s from ReplicaSchedulingPreference %s/%s: %w", contract.AnnotationRebalance, rsp.Namespace, rsp.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Unreadable rebalance annotation removed", "error", why.Error())
	r.recorder.Eventf(rsp, nil, corev1.EventTypeWarning, ReasonStateReset, ActionRelease,
		"unreadable %s annotation removed, spec left as it is: %v", contract.AnnotationRebalance, why)
	return nil
}

func (r *Reconciler) applyRSP(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, p contract.Placement) error {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": specFields(p)}}
	u.SetGroupVersionKind(fedschedv1a1.SchemeGroupVersion.WithKind("ReplicaSchedulingPreference"))
	u.SetNamespace(rsp.Namespace)
	u.SetName(rsp.Name)
	u.SetResourceVersion(rsp.ResourceVersion)
	if err := r.host.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		if apierrors.IsConflict(err) {
			return errStale
		}
		return fmt.Errorf("applying ReplicaSchedulingPreference %s/%s: %w", rsp.Namespace, rsp.Name, err)
	}
	return nil
}

// specFields spells out minReplicas and weight even when zero: a field left
// out of an apply is only removed when no other manager (the user's) also
// owns it, so omitting a zero could leave the user's old value in place.
// maxReplicas is left out only when unbounded; the user cannot have set it
// on a cluster whose baseline has none.
func specFields(p contract.Placement) map[string]any {
	clusters := map[string]any{}
	for n, c := range p.Clusters {
		e := map[string]any{"minReplicas": c.MinReplicas, "weight": c.Weight}
		if c.MaxReplicas != nil {
			e["maxReplicas"] = *c.MaxReplicas
		}
		clusters[n] = e
	}
	return map[string]any{"totalReplicas": int64(p.TotalReplicas), "clusters": clusters}
}

// markFailback starts the probation of members given replicas back: if
// they run out of capacity during it, their next failback backs off.
func markFailback(m *contract.RebalanceState, members []string, now time.Time) {
	for _, n := range members {
		if m.Members == nil {
			m.Members = map[string]contract.MemberTimers{}
		}
		t := m.Members[n]
		t.LastFailback = timePtr(now)
		m.Members[n] = t
	}
}
