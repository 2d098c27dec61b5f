package rebalance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// +kubebuilder:rbac:groups=failover.fedfailover.io,resources=rebalancerecords,verbs=get;list;watch;create;update;delete

// The state of a managed RSP lives in its RebalanceRecord (same namespace
// and name), an object on the host that fedfailover alone writes. The RSP
// carries none of it: anyone who can write the RSP could forge it there,
// `kubectl replace`, re-applies and restores drop it, and every write of
// the RSP makes kubefed replan. The RSP is written only to move replicas.

// stored is the state a pass starts from.
type stored struct {
	// rec is the RSP's record; nil when there is none yet, or when the one
	// there is about an earlier RSP of the same name (replaced by the
	// first write).
	rec *v1alpha1.RebalanceRecord
	// stale is that earlier RSP's record, replaced by the first write.
	stale *v1alpha1.RebalanceRecord
	// state is what to plan from; nil: first touch.
	state *contract.RebalanceState
	// migrated: state was seeded from the legacy annotation, which is
	// removed once the record holds it.
	migrated bool
	// unreadable: the legacy annotation could not be used.
	unreadable error
	// clamped lists the recorded values taken as now (times later than
	// this process's now) or as the cap (backoff levels).
	clamped []string
	// missing says why the RSP is held: there is no state, and spec fields
	// that fedfailover's field manager alone wrote (its pins) are on it.
	missing string
}

// futureSlack is how far a recorded time may be ahead of this process's
// now without being clamped: times are recorded to the second, and
// lastChange rounded up (so minInterval is never shortened).
const futureSlack = time.Second

// getRecord reads the RSP's record: from the cache, or the process's own
// last write when the cache has not caught up with it yet, or (with mem,
// the planning pass) live when the cache has none: a record just created
// must not look missing. Other readers (policy selection, status, release
// of an RSP no policy manages, passed over on every fan-out) use the cache
// alone.
func (r *Reconciler) getRecord(ctx context.Context, key types.NamespacedName, mem *memory) (*v1alpha1.RebalanceRecord, error) {
	var own *v1alpha1.RebalanceRecord
	if mem != nil {
		r.mu.Lock()
		own = mem.rec
		r.mu.Unlock()
	}
	rec := &v1alpha1.RebalanceRecord{}
	err := r.host.Get(ctx, key, rec)
	if apierrors.IsNotFound(err) && r.live != nil && mem != nil {
		err = r.live.Get(ctx, key, rec)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading RebalanceRecord %s: %w", key, err)
	case own != nil && own.UID == rec.UID && own.Generation > rec.Generation:
		return own.DeepCopy(), nil
	}
	return rec, nil
}

// loadState reads the RSP's state: its record; without one, the legacy
// annotation as a hint; without either, nothing (first touch), unless
// fedfailover's own pins are on the spec.
func (r *Reconciler) loadState(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, mem *memory, now time.Time) (stored, error) {
	var out stored
	rec, err := r.getRecord(ctx, client.ObjectKeyFromObject(rsp), mem)
	if err != nil {
		return out, err
	}
	if rec != nil {
		out.rec = rec
		switch m := contract.StateFromRecord(&rec.Spec); {
		case rec.Spec.RSPUID != "" && rec.Spec.RSPUID != string(rsp.UID):
			// An earlier RSP of that name. Its state applies only to a copy
			// of what fedfailover last wrote to it (the RSP restored, or
			// deleted and created again from its shifted spec).
			if rec.Spec.Released || m.Applied == nil || !m.Applied.Equal(specPlacement(rsp)) {
				out.rec, out.stale = nil, rec
				break
			}
			out.state = m
		case rec.Spec.Released:
			// Given back: the spec carries no pin of fedfailover's, it is
			// the baseline again (first touch).
		default:
			out.state = m
		}
		if out.state != nil {
			out.clamped = clampState(out.state, now)
			return out, nil
		}
		if out.rec != nil {
			return out, nil // released: no pin on the spec
		}
	}
	own := ownersOf(rsp.ManagedFields)
	if _, ok := rsp.Annotations[contract.AnnotationRebalance]; ok {
		m, err := legacyHint(rsp)
		if err == nil {
			out.state, out.migrated = m, true
			out.clamped = clampState(m, now)
			return out, nil
		}
		out.unreadable = err
	}
	if pins := ownPins(own); len(pins) > 0 {
		out.missing = fmt.Sprintf("no RebalanceRecord, and fedfailover's field manager %q alone wrote %s: those are its own pins, "+
			"not the user's spec, so they are not taken as the baseline; nothing is planned or restored until the record is back, "+
			"or the spec is written again by its owner (every one of those fields: e.g. kubectl replace or kubectl edit)",
			FieldOwner, strings.Join(pins, ", "))
	}
	return out, nil
}

// legacyHint is the state of an older fedfailover's annotation, as a hint:
// a baseline or applied placement no RSP could have makes it unusable; its
// timers (lastChange, backoff levels, failbacks) count only when
// fedfailover's field manager alone wrote the annotation's value (anyone
// who can write the RSP can write it).
func legacyHint(rsp *fedschedv1a1.ReplicaSchedulingPreference) (*contract.RebalanceState, error) {
	m, err := contract.DecodeRebalanceState(rsp.Annotations)
	if err != nil {
		return nil, err
	}
	m = m.Clone()
	if err := m.Baseline.Valid(); err != nil {
		return nil, fmt.Errorf("annotation %s: baseline: %w", contract.AnnotationRebalance, err)
	}
	if m.Applied != nil {
		if err := m.Applied.Valid(); err != nil {
			return nil, fmt.Errorf("annotation %s: applied: %w", contract.AnnotationRebalance, err)
		}
	}
	if !annotationOwnedByUs(rsp.ManagedFields) {
		m.LastChange, m.Members = nil, nil
	}
	return m, nil
}

// clampState takes each recorded time later than now (beyond futureSlack)
// as now, and each backoff level above contract.MaxBackoff as that: a
// far-future lastChange would block every change, a far-future failback
// would keep a member on probation, a forged level would delay its
// failback. It names what it changed.
func clampState(m *contract.RebalanceState, now time.Time) []string {
	var out []string
	limit := now.Add(futureSlack)
	clamp := func(t *metav1.Time, what string) *metav1.Time {
		if t == nil || !t.After(limit) {
			return t
		}
		out = append(out, fmt.Sprintf("%s %s", what, t.UTC().Format(time.RFC3339)))
		return timePtr(now)
	}
	m.LastChange = clamp(m.LastChange, "lastChange")
	for _, n := range sortedKeys(m.Members) {
		t := m.Members[n]
		t.FailingSince = clamp(t.FailingSince, n+" failingSince")
		t.RoomSince = clamp(t.RoomSince, n+" roomSince")
		t.LastFailback = clamp(t.LastFailback, n+" lastFailback")
		if u := t.UnschedulableSince; u != nil && u.After(limit) {
			out = append(out, fmt.Sprintf("%s unschedulableSince %s", n, u.UTC().Format(time.RFC3339)))
			t.UnschedulableSince = microPtr(now)
		}
		if t.Backoff > contract.MaxBackoff || t.Backoff < 0 {
			out = append(out, fmt.Sprintf("%s backoff level %d (max %d)", n, t.Backoff, contract.MaxBackoff))
			t.Backoff = min(max(t.Backoff, 0), contract.MaxBackoff)
		}
		m.Members[n] = t
	}
	return out
}

// ownPins are the spec fields fedfailover's field manager owns and no
// other manager does: values only fedfailover wrote.
func ownPins(o fieldOwners) []string {
	var out []string
	for p := range o.ours {
		if !o.others[p] && (p == pathTotal || strings.Count(p, "/") == 2) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// annotationOwnedByUs: fedfailover's field manager owns the legacy
// annotation and no other manager does.
func annotationOwnedByUs(entries []metav1.ManagedFieldsEntry) bool {
	key := "f:" + contract.AnnotationRebalance
	var ours, others bool
	for _, e := range entries {
		if e.FieldsV1 == nil || e.Subresource != "" {
			continue
		}
		var fields struct {
			Metadata struct {
				Annotations map[string]any `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		if _, ok := fields.Metadata.Annotations[key]; !ok {
			continue
		}
		if e.Manager == FieldOwner {
			ours = true
		} else {
			others = true
		}
	}
	return ours && !others
}

// saveRecord writes m as the RSP's record, unless the record already says
// so: created, or updated with the record's resourceVersion (a record
// changed meanwhile is a stale pass).
func (r *Reconciler) saveRecord(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, m *contract.RebalanceState, st *stored, mem *memory) error {
	spec := m.RecordSpec()
	spec.RSPUID = string(rsp.UID)
	spec.Migrated = st.migrated || (st.rec != nil && st.rec.Spec.Migrated)
	rec := st.rec
	switch {
	case rec != nil && equality.Semantic.DeepEqual(rec.Spec, spec):
		return nil
	case rec != nil:
		rec = rec.DeepCopy()
		rec.Spec = spec
		err := r.host.Update(ctx, rec, client.FieldOwner(FieldOwner))
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errStale
		}
		if err != nil {
			return fmt.Errorf("updating RebalanceRecord %s/%s: %w", rsp.Namespace, rsp.Name, err)
		}
	case st.stale != nil:
		rec = st.stale.DeepCopy()
		rec.Spec = spec
		if err := r.host.Update(ctx, rec, client.FieldOwner(FieldOwner)); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return errStale
			}
			return fmt.Errorf("replacing RebalanceRecord %s/%s of an earlier RSP: %w", rsp.Namespace, rsp.Name, err)
		}
		st.stale = nil
	default:
		var err error
		if rec, err = r.createRecord(ctx, rsp, spec); err != nil {
			return err
		}
	}
	st.rec = rec
	if mem != nil {
		r.mu.Lock()
		mem.rec = rec.DeepCopy()
		r.mu.Unlock()
	}
	return nil
}

// createRecord creates the RSP's record with spec; one already there (made
// meanwhile) is a stale pass.
func (r *Reconciler) createRecord(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, spec v1alpha1.RebalanceRecordSpec) (*v1alpha1.RebalanceRecord, error) {
	rec := &v1alpha1.RebalanceRecord{ObjectMeta: metav1.ObjectMeta{Namespace: rsp.Namespace, Name: rsp.Name}, Spec: spec}
	if err := r.host.Create(ctx, rec, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, errStale
		}
		return nil, fmt.Errorf("creating RebalanceRecord %s/%s: %w", rsp.Namespace, rsp.Name, err)
	}
	return rec, nil
}

// dropLegacyAnnotation removes the legacy annotation from the RSP once the
// record holds the state: when it was just migrated, or when it is
// fedfailover's own leftover. One merge patch of that key alone: whoever
// else owns fields of the RSP keeps them.
func (r *Reconciler) dropLegacyAnnotation(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference, migrated bool) error {
	if _, ok := rsp.Annotations[contract.AnnotationRebalance]; !ok || (!migrated && !annotationOwnedByUs(rsp.ManagedFields)) {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, contract.AnnotationRebalance)
	if err := r.host.Patch(ctx, rsp, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("removing annotation %s from ReplicaSchedulingPreference %s/%s: %w", contract.AnnotationRebalance, rsp.Namespace, rsp.Name, client.IgnoreNotFound(err))
	}
	ctrl.LoggerFrom(ctx).Info("Legacy rebalance annotation removed: the RebalanceRecord holds the state")
	return nil
}

// deleteRecord removes the record of an RSP that is gone.
func (r *Reconciler) deleteRecord(ctx context.Context, key types.NamespacedName) error {
	rec := &v1alpha1.RebalanceRecord{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := r.host.Delete(ctx, rec); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting RebalanceRecord %s: %w", key, err)
	}
	return nil
}

// storedPolicy is the policy recorded as managing the RSP: its record's,
// unless released; without a record, the legacy annotation's.
func (r *Reconciler) storedPolicy(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference) (string, error) {
	m, err := r.shownState(ctx, rsp)
	if err != nil || m == nil {
		return "", err
	}
	return m.Policy, nil
}

// shownState is the recorded state of the RSP as it is, without clamping
// or checks (status, the finalizer): the record of this RSP unless
// released, else the legacy annotation; nil when none.
func (r *Reconciler) shownState(ctx context.Context, rsp *fedschedv1a1.ReplicaSchedulingPreference) (*contract.RebalanceState, error) {
	rec, err := r.getRecord(ctx, client.ObjectKeyFromObject(rsp), nil)
	if err != nil {
		return nil, err
	}
	if rec != nil && (rec.Spec.RSPUID == "" || rec.Spec.RSPUID == string(rsp.UID)) {
		if rec.Spec.Released {
			return nil, nil
		}
		return contract.StateFromRecord(&rec.Spec), nil
	}
	m, err := contract.DecodeRebalanceState(rsp.Annotations)
	if err != nil {
		return nil, nil //nolint:nilerr // unreadable: the RSP's own pass reports it
	}
	return m, nil
}

// reportLoad reports what loading the state found: a legacy annotation
// that cannot be used, values clamped.
func (r *Reconciler) reportLoad(ctx context.Context, pol *v1alpha1.FailoverPolicy, rsp *fedschedv1a1.ReplicaSchedulingPreference, st *stored) {
	if st.unreadable != nil {
		r.report(ctx, pol, rsp, "", ReasonStateReset, ActionBaselineChanged,
			fmt.Sprintf("unusable %s annotation, ignored: the current spec is the baseline (%v)", contract.AnnotationRebalance, st.unreadable), pol.Spec.DryRun)
	}
	if len(st.clamped) > 0 {
		r.report(ctx, pol, rsp, "", ReasonStateClamped, ActionStateCorrected,
			"recorded rebalance state corrected: "+strings.Join(st.clamped, ", ")+" taken as now (times) or as the cap (levels)", pol.Spec.DryRun)
	}
	if st.migrated {
		r.recorder.Eventf(rsp, pol, corev1.EventTypeNormal, ReasonStateMigrated, ActionStateMigrated,
			"state of the %s annotation moved into RebalanceRecord %s/%s", contract.AnnotationRebalance, rsp.Namespace, rsp.Name)
	}
}
