package rebalance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// The rebalance state must survive whatever happens to the RSP, and what
// can be read back from outside fedfailover's own record never blocks or
// delays a change (issue #29, item 3). These run on the real API server:
// field ownership, resourceVersions and Update semantics are the point.

// stateFixture is a policy (clusterFailedAfter 10s, minInterval 5s, window
// 20s; one failback step moves every replica back), the user's 1:1 RSP of 6
// replicas on the host and two members running 3 each.
func stateFixture(t *testing.T, name string) (*Reconciler, client.Client, *fakeMembers, client.ObjectKey, contract.Placement) {
	t.Helper()
	pol := rebalancing(name, func(p *v1alpha1.FailoverPolicy) {
		p.Spec.Rebalance.Failback.MakeBeforeBreak = false
		p.Spec.Rebalance.Failback.MaxStep = 10
	})
	r, c, _, ns := onHost(t, pol)
	rsp := userRSP(t, c, ns)
	fm := noMembers(t)
	fm.add(t, "member1", webOn(ns, "member1", 3)...)
	fm.add(t, "member2", webOn(ns, "member2", 3)...)
	r.members, r.opts = kubefedSeesDown{fm}, Options{}.withDefaults()
	return r, c, fm, client.ObjectKeyFromObject(rsp), specPlacement(rsp)
}

// kubefedSeesDown is a federation where kubefed, too, reports the members
// fedfailover cannot reach not Ready: their failure is confirmed
// (MemberFailed, maxReplicas 0), and coming back means a failback.
type kubefedSeesDown struct{ *fakeMembers }

func (k kubefedSeesDown) KubeFedClusters(ctx context.Context, sel labels.Selector) ([]kubefedv1beta1.KubeFedCluster, error) {
	out, err := k.fakeMembers.KubeFedClusters(ctx, sel)
	for i := range out {
		if k.down[out[i].Name] {
			out[i].Status.Conditions[0].Status = corev1.ConditionFalse
		}
	}
	return out, err
}

// shiftByFailure fails member2 from t0 on and passes until fedfailover has
// shifted its replicas to member1 (clusterFailedAfter 10s).
func shiftByFailure(t *testing.T, r *Reconciler, c client.Client, fm *fakeMembers, key client.ObjectKey, user contract.Placement) {
	t.Helper()
	passAt(t, r, key, t0)
	fm.down["member2"] = true
	passAt(t, r, key, t0.Add(time.Second))
	passAt(t, r, key, t0.Add(12*time.Second))
	if got := specPlacement(specOf(t, c, key)); got.Equal(user) || got.Clusters["member2"].MaxReplicas == nil || *got.Clusters["member2"].MaxReplicas != 0 {
		t.Fatalf("setup: spec %+v, want member2 pinned at maxReplicas 0", got)
	}
}

// failBackFrom passes every 6s (past minInterval) from start for up to two
// minutes and returns when the RSP holds want; it fails otherwise.
func failBackFrom(t *testing.T, r *Reconciler, c client.Client, key client.ObjectKey, start time.Time, want contract.Placement) time.Duration {
	t.Helper()
	for d := time.Duration(0); d <= 2*time.Minute; d += 6 * time.Second {
		passAt(t, r, key, start.Add(d))
		if specPlacement(specOf(t, c, key)).Equal(want) {
			return d
		}
	}
	t.Fatalf("after two minutes of healthy members the spec is %+v, want the user's %+v", specOf(t, c, key).Spec, want)
	return 0
}

// The fixture fails back to the user's placement when nothing is forged.
func TestStateFixtureFailsBack(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-plain")
	shiftByFailure(t, r, c, fm, key, user)
	fm.down["member2"] = false
	if d := failBackFrom(t, r, c, key, t0.Add(20*time.Second), user); d < 20*time.Second || d > 30*time.Second {
		t.Errorf("failed back %s after member2's return, want after the 20s window, within a step", d)
	}
}

// (a) A `kubectl replace` (an Update of the RSP as the user has it, without
// fedfailover's annotation) while the RSP is shifted keeps the baseline:
// once member2 is back, failback restores the user's 1:1.
func TestReplaceWhileShiftedKeepsBaseline(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-replace")
	shiftByFailure(t, r, c, fm, key, user)

	rsp := specOf(t, c, key)
	delete(rsp.Annotations, contract.AnnotationRebalance)
	rsp.ManagedFields = nil
	if err := c.Update(context.Background(), rsp, client.FieldOwner("kubectl-replace")); err != nil {
		t.Fatal(err)
	}

	fm.down["member2"] = false
	d := failBackFrom(t, r, c, key, t0.Add(20*time.Second), user)
	if d < 20*time.Second {
		t.Errorf("failed back %s after member2's return, before the stabilization window (20s)", d)
	}
}

// (b) A lastChange far in the future (forged, restored, or written under a
// host clock that ran ahead) does not block every later change: it counts
// as now, so the failback comes within the window and minInterval.
func TestFutureLastChangeDoesNotBlock(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-future")
	shiftByFailure(t, r, c, fm, key, user)
	editOwnState(t, r, c, key, func(m *contract.RebalanceState) {
		m.LastChange = timePtr(t0.AddDate(10, 0, 0))
	})

	fm.down["member2"] = false
	failBackFrom(t, r, c, key, t0.Add(20*time.Second), user)
}

// (c) A backoff level forged into the annotation by someone else does not
// delay the failback past the policy's own window (the backoff cap would
// have made it an hour).
func TestForgedBackoffDoesNotDelayFailback(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-backoff")
	shiftByFailure(t, r, c, fm, key, user)
	forgeAnnotation(t, c, key, "st-backoff", user, func(m *contract.RebalanceState) {
		m.Members = map[string]contract.MemberTimers{"member2": {Backoff: maxBackoff}}
	})

	fm.down["member2"] = false
	if d := failBackFrom(t, r, c, key, t0.Add(20*time.Second), user); d > 30*time.Second {
		t.Errorf("failed back %s after member2's return, want within the 20s window and a step", d)
	}
}

// (d) fedfailover writes the RSP only to move replicas: not on first touch,
// not when a member starts failing, not when a pass finds nothing to
// change. Each write makes kubefed replan at once.
func TestNoStateWritesToRSP(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-nowrite")
	rv := specOf(t, c, key).ResourceVersion
	unwritten := func(when string) {
		t.Helper()
		if got := specOf(t, c, key); got.ResourceVersion != rv {
			t.Fatalf("%s: RSP written (resourceVersion %s -> %s, annotations %v)", when, rv, got.ResourceVersion, got.Annotations)
		}
	}
	passAt(t, r, key, t0)
	unwritten("first pass, both members healthy")
	fm.down["member2"] = true
	passAt(t, r, key, t0.Add(time.Second))
	unwritten("member2 failing, not failed yet")
	passAt(t, r, key, t0.Add(5*time.Second))
	unwritten("member2 still failing")
	passAt(t, r, key, t0.Add(12*time.Second))
	got := specOf(t, c, key)
	if specPlacement(got).Equal(user) {
		t.Fatal("member2 failed for clusterFailedAfter: want the shift written")
	}
	if _, ok := got.Annotations[contract.AnnotationRebalance]; ok {
		t.Errorf("the shift carries fedfailover's state annotation: %v", got.Annotations)
	}
	for _, e := range got.ManagedFields {
		if e.Manager != FieldOwner || e.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields); err != nil {
			t.Fatal(err)
		}
		for k := range fields {
			if k != "f:spec" {
				t.Errorf("fedfailover owns %s of the RSP, want spec fields only", k)
			}
		}
	}
	rv = got.ResourceVersion
	passAt(t, r, key, t0.Add(13*time.Second))
	passAt(t, r, key, t0.Add(20*time.Second))
	unwritten("passes with nothing to change")
}

// forgeAnnotation writes fedfailover's rebalance annotation on the RSP as
// someone else (field manager "kubectl-edit") would: the one there, or a
// whole state of policy pol with baseline user and the live spec as applied,
// edited.
func forgeAnnotation(t *testing.T, c client.Client, key client.ObjectKey, pol string, user contract.Placement, edit func(*contract.RebalanceState)) {
	t.Helper()
	rsp := specOf(t, c, key)
	m, err := contract.DecodeRebalanceState(rsp.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	if m == nil {
		live := specPlacement(rsp)
		m = &contract.RebalanceState{Policy: pol, Baseline: user, Applied: &live, LastChange: timePtr(t0.Add(12 * time.Second))}
	}
	edit(m)
	if rsp.Annotations == nil {
		rsp.Annotations = map[string]string{}
	}
	rsp.Annotations[contract.AnnotationRebalance] = m.Encode()
	if err := c.Update(context.Background(), rsp, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
}

// editOwnState edits the state as fedfailover keeps it: the RSP's
// RebalanceRecord.
func editOwnState(t *testing.T, _ *Reconciler, c client.Client, key client.ObjectKey, edit func(*contract.RebalanceState)) {
	t.Helper()
	rec := recordOf(t, c, key)
	m := contract.StateFromRecord(&rec.Spec)
	edit(m)
	spec := m.RecordSpec()
	spec.RSPUID, spec.Migrated = rec.Spec.RSPUID, rec.Spec.Migrated
	rec.Spec = spec
	if err := c.Update(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// recordOf is the RSP's RebalanceRecord.
func recordOf(t *testing.T, c client.Client, key client.ObjectKey) *v1alpha1.RebalanceRecord {
	t.Helper()
	rec := &v1alpha1.RebalanceRecord{}
	if err := c.Get(context.Background(), key, rec); err != nil {
		t.Fatalf("RebalanceRecord %s: %v", key, err)
	}
	return rec
}

// putRecord records m as the state of the RSP key (created or replaced),
// as fedfailover would have written it.
func putRecord(t *testing.T, c client.Client, key client.ObjectKey, m *contract.RebalanceState) {
	t.Helper()
	rsp := specOf(t, c, key)
	rec := &v1alpha1.RebalanceRecord{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: m.RecordSpec()}
	rec.Spec.RSPUID = string(rsp.UID)
	old := &v1alpha1.RebalanceRecord{}
	if err := c.Get(context.Background(), key, old); err == nil {
		rec.ResourceVersion = old.ResourceVersion
		if err := c.Update(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := c.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// Field ownership without a record: the RSP shifted by fedfailover loses
// its RebalanceRecord. The pins fedfailover's field manager alone wrote are
// not taken as the baseline: the RSP is held (StateMissing), nothing is
// written, and it is planned again once the record is back.
func TestOwnPinsWithoutRecordHold(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-missing")
	rec := events.NewFakeRecorder(100)
	r.recorder = rec
	shiftByFailure(t, r, c, fm, key, user)
	saved := contract.StateFromRecord(&recordOf(t, c, key).Spec)
	if err := c.Delete(context.Background(), recordOf(t, c, key)); err != nil {
		t.Fatal(err)
	}
	r.forget(key) // a restarted process: nothing of its own either
	fm.down["member2"] = false
	before := specOf(t, c, key)
	for i := range 3 {
		passAt(t, r, key, t0.Add(time.Duration(20+30*i)*time.Second))
	}
	if got := specOf(t, c, key); got.ResourceVersion != before.ResourceVersion {
		t.Fatalf("RSP written without a record: %+v", got.Spec)
	}
	if err := c.Get(context.Background(), key, &v1alpha1.RebalanceRecord{}); err == nil {
		t.Fatal("a record was made up from the shifted spec")
	}
	if n := countPrefix(drain(rec.Events), "Warning "+v1alpha1.ReasonStateMissing+" "); n != 2 {
		t.Errorf("%d StateMissing events, want one on the RSP and one on the policy", n)
	}
	entries, _ := r.store.Snapshot("st-missing")
	if st := desiredStatus(&v1alpha1.FailoverPolicy{}, entries); len(st.Rebalances) != 1 || st.Rebalances[0].Reason != v1alpha1.ReasonStateMissing || !st.Rebalances[0].Shifted {
		t.Errorf("rebalances %+v, want the RSP held as StateMissing, shifted", st.Rebalances)
	}

	putRecord(t, c, key, saved) // restored from a backup
	failBackFrom(t, r, c, key, t0.Add(2*time.Minute), user)
}

// The user writing the spec back (kubectl replace, or edit, of every
// field) ends the hold: no value is fedfailover's alone any more, and
// their spec is the baseline.
func TestUserWriteEndsStateMissingHold(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-takeback")
	shiftByFailure(t, r, c, fm, key, user)
	if err := c.Delete(context.Background(), recordOf(t, c, key)); err != nil {
		t.Fatal(err)
	}
	r.forget(key)
	fm.down["member2"] = false
	passAt(t, r, key, t0.Add(20*time.Second))
	if _, err := recordE(c, key); err == nil {
		t.Fatal("record made up while fedfailover's pins are on the spec")
	}
	rsp := specOf(t, c, key)
	rsp.Spec.Clusters = prefs(1, 1)
	rsp.ManagedFields = nil
	if err := c.Update(context.Background(), rsp, client.FieldOwner("kubectl-replace")); err != nil {
		t.Fatal(err)
	}
	passAt(t, r, key, t0.Add(21*time.Second))
	rec, err := recordE(c, key)
	if err != nil {
		t.Fatalf("no record once the user wrote their spec back: %v", err)
	}
	if m := contract.StateFromRecord(&rec.Spec); !m.Baseline.Equal(user) {
		t.Errorf("baseline %+v, want the user's %+v", m.Baseline, user)
	}
}

func recordE(c client.Client, key client.ObjectKey) (*v1alpha1.RebalanceRecord, error) {
	rec := &v1alpha1.RebalanceRecord{}
	return rec, c.Get(context.Background(), key, rec)
}

// Migration: the annotation of an older fedfailover (written with the RSP
// spec by its field manager) seeds the record once, is removed from the
// RSP, and its baseline is what failback returns to.
func TestLegacyAnnotationMigrates(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-migrate")
	rec := events.NewFakeRecorder(100)
	r.recorder = rec
	six, zero := int64(6), int64(0)
	shifted := contract.Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{
		"member1": {MinReplicas: 6, MaxReplicas: &six, Weight: 6}, "member2": {MaxReplicas: &zero}}}
	old := &contract.RebalanceState{Policy: "st-migrate", Baseline: user, Applied: &shifted, LastChange: timePtr(t0.Add(-time.Minute)),
		Members: map[string]contract.MemberTimers{"member2": {Backoff: 1}}}
	legacyApply(t, c, key, shifted, old)

	passAt(t, r, key, t0)
	got := specOf(t, c, key)
	if _, ok := got.Annotations[contract.AnnotationRebalance]; ok {
		t.Errorf("legacy annotation left on the RSP: %v", got.Annotations)
	}
	rc := recordOf(t, c, key)
	m := contract.StateFromRecord(&rc.Spec)
	if !rc.Spec.Migrated || !m.Baseline.Equal(user) || rc.Spec.RSPUID != string(got.UID) || m.Members["member2"].Backoff != 1 ||
		!timeOf(m.LastChange).Equal(t0.Add(-time.Minute)) {
		t.Errorf("record %+v, want the annotation's state, migrated", rc.Spec)
	}
	if n := countPrefix(drain(rec.Events), "Normal "+ReasonStateMigrated+" "); n != 1 {
		t.Errorf("%d StateMigrated events, want 1", n)
	}
	_ = fm
	// backoff 1: the window (20s) doubled
	if d := failBackFrom(t, r, c, key, t0.Add(time.Second), user); d < 40*time.Second {
		t.Errorf("failed back after %s, want the migrated backoff level's 40s", d)
	}
}

// legacyApply writes spec p and the legacy annotation with fedfailover's
// field manager, as fedfailover before RebalanceRecords did.
func legacyApply(t *testing.T, c client.Client, key client.ObjectKey, p contract.Placement, m *contract.RebalanceState) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": specFields(p)}}
	u.SetAPIVersion("scheduling.kubefed.io/v1alpha1")
	u.SetKind("ReplicaSchedulingPreference")
	u.SetNamespace(key.Namespace)
	u.SetName(key.Name)
	u.SetAnnotations(map[string]string{contract.AnnotationRebalance: m.Encode()})
	if err := c.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
}

// A record whose times lie in the future and whose levels pass the cap is
// corrected: the times are now, the levels the cap, and it says so.
func TestClampState(t *testing.T) {
	far := timePtr(t0.AddDate(1, 0, 0))
	m := &contract.RebalanceState{LastChange: far, Members: map[string]contract.MemberTimers{
		"a": {LastFailback: far, Backoff: 40}, "b": {RoomSince: timePtr(t0.Add(time.Second)), Backoff: 2}}}
	got := clampState(m, t0)
	if len(got) != 3 || !timeOf(m.LastChange).Equal(t0) || !timeOf(m.Members["a"].LastFailback).Equal(t0) ||
		m.Members["a"].Backoff != contract.MaxBackoff || m.Members["b"].Backoff != 2 || !timeOf(m.Members["b"].RoomSince).Equal(t0.Add(time.Second)) {
		t.Errorf("clamped %v to %+v", got, m)
	}
}

// The record goes with its RSP.
func TestDeletedRSPDeletesRecord(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-gone")
	shiftByFailure(t, r, c, fm, key, user)
	if err := c.Delete(context.Background(), specOf(t, c, key)); err != nil {
		t.Fatal(err)
	}
	passAt(t, r, key, t0.Add(time.Minute))
	if _, err := recordE(c, key); err == nil {
		t.Error("record kept after its RSP was deleted")
	}
}

// Scaling an RSP at its baseline (a user, an autoscaler) makes the new spec
// its baseline, recorded, not reported: two events and a decision for each
// scale wrote to the host at every scale event of the goal-size churn and
// filled the policy's recentDecisions.
func TestScaleAtBaselineRecordedNotReported(t *testing.T) {
	r, c, _, key, _ := stateFixture(t, "st-scale")
	rec := events.NewFakeRecorder(100)
	r.recorder = rec
	passAt(t, r, key, t0)
	scaleRSP(t, c, key, 8)
	passAt(t, r, key, t0.Add(time.Second))
	if m := contract.StateFromRecord(&recordOf(t, c, key).Spec); m.Baseline.TotalReplicas != 8 {
		t.Errorf("baseline totalReplicas %d after the scale to 8, want 8", m.Baseline.TotalReplicas)
	}
	if n := countPrefix(drain(rec.Events), "Normal "+ReasonAdoptedUserEdit+" "); n != 0 {
		t.Errorf("%d %s events for scaling an RSP at its baseline, want none", n, ReasonAdoptedUserEdit)
	}
	if _, ds := r.store.Snapshot("st-scale"); len(ds) != 0 {
		t.Errorf("decisions %+v for scaling an RSP at its baseline, want none", ds)
	}
}

// The same scale while fedfailover's shift is on the RSP changes what the
// failback restores: it is reported, on the RSP and on the policy.
func TestScaleWhileShiftedReported(t *testing.T) {
	r, c, fm, key, user := stateFixture(t, "st-scale-shifted")
	rec := events.NewFakeRecorder(100)
	r.recorder = rec
	shiftByFailure(t, r, c, fm, key, user)
	drain(rec.Events)
	scaleRSP(t, c, key, 8)
	passAt(t, r, key, t0.Add(13*time.Second))
	if m := contract.StateFromRecord(&recordOf(t, c, key).Spec); m.Baseline.TotalReplicas != 8 {
		t.Errorf("baseline totalReplicas %d after the scale to 8, want 8", m.Baseline.TotalReplicas)
	}
	if n := countPrefix(drain(rec.Events), "Normal "+ReasonAdoptedUserEdit+" "); n != 2 {
		t.Errorf("%d %s events for scaling a shifted RSP, want one on the RSP and one on the policy", n, ReasonAdoptedUserEdit)
	}
	_, ds := r.store.Snapshot("st-scale-shifted")
	if !slices.ContainsFunc(ds, func(d v1alpha1.Decision) bool { return d.Reason == ReasonAdoptedUserEdit }) {
		t.Errorf("decisions %+v, want the adopted edit", ds)
	}
}

// scaleRSP sets the RSP's totalReplicas as `kubectl edit` would.
func scaleRSP(t *testing.T, c client.Client, key client.ObjectKey, total int32) {
	t.Helper()
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	patch := fmt.Appendf(nil, `{"spec":{"totalReplicas":%d}}`, total)
	if err := c.Patch(context.Background(), rsp, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
}
