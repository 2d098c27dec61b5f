package rebalance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// Planned maintenance of a member (issue #32), on the real API server:
// the MemberMaintenance's admission, conditions and status, and the RSP
// writes of the drain and of its end, with kubefed and the kubelets
// played by releasePasses (fewer replicas at once, more only Ready by
// the next pass).

// maintenanceFixture is the user's 1:1 RSP of 6 replicas, member1 and
// member2 running 3 each; member2's one node takes member2Pods pods.
func maintenanceFixture(t *testing.T, name string, member2Pods int64) (*Reconciler, client.Client, *fakeMembers, *v1alpha1.FailoverPolicy, types.NamespacedName, contract.Placement) {
	t.Helper()
	pol := rebalancing(name, nil) // minInterval 5s, window 20s, maxStep 2, make-before-break
	r, c, _, ns := onHost(t, pol)
	r.recorder = events.NewFakeRecorder(1000)
	rsp := userRSP(t, c, ns)
	fm := noMembers(t)
	fm.add(t, "member1", webOn(ns, "member1", 3)...)
	m2 := webOn(ns, "member2", 3)
	m2[2] = readyNode("n1", member2Pods)
	fm.add(t, "member2", m2...)
	r.members, r.opts = fm, Options{}.withDefaults()
	return r, c, fm, pol, client.ObjectKeyFromObject(rsp), specPlacement(rsp)
}

// publishStatus writes the policy's status as the status writer would
// (its N+1 figures are what the admission reads).
func publishStatus(t *testing.T, r *Reconciler, c client.Client, pol *v1alpha1.FailoverPolicy) {
	t.Helper()
	got := &v1alpha1.FailoverPolicy{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pol), got); err != nil {
		t.Fatal(err)
	}
	entries, _ := r.store.Snapshot(pol.Name)
	got.Status.FailoverReadiness = desiredStatus(got, entries).FailoverReadiness
	if err := c.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
}

// requestMaintenance creates a MemberMaintenance of member (removed at the
// end of the test: every RSP of the host would drain it).
func requestMaintenance(t *testing.T, c client.Client, name, member string, force bool) *v1alpha1.MemberMaintenance {
	t.Helper()
	mm := &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.MemberMaintenanceSpec{Member: member, Force: force}}
	if err := c.Create(context.Background(), mm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), mm) })
	return mm
}

// reconcileMaintenance runs the maintenance controller once and returns
// the maintenance as it is then.
func reconcileMaintenance(t *testing.T, r *Reconciler, c client.Client, name string) *v1alpha1.MemberMaintenance {
	t.Helper()
	m := &maintenance{r: r, progressEvery: time.Second}
	if _, err := m.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.MemberMaintenance{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func condOf(mm *v1alpha1.MemberMaintenance, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(mm.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// wantSteps fails unless no write gives member2 more than maxStep (2)
// replicas at once.
func wantSteps(t *testing.T, writes []map[string]int, member string, start int) {
	t.Helper()
	prev := start
	for i, w := range writes {
		if w[member]-prev > 2 {
			t.Errorf("write %d gives %s %d replicas at once, want at most maxStep 2: writes %v", i+1, member, w[member]-prev, writes)
		}
		prev = w[member]
	}
}

// drainMember1 accepts a maintenance of member1 and passes until it is
// drained, checking the drain's rules on the way.
func drainMember1(t *testing.T, r *Reconciler, c client.Client, fm *fakeMembers, pol *v1alpha1.FailoverPolicy, key types.NamespacedName, name string) {
	t.Helper()
	passAt(t, r, key, t0)
	publishStatus(t, r, c, pol)
	requestMaintenance(t, c, name, "member1", false)
	if mm := reconcileMaintenance(t, r, c, name); condOf(mm, v1alpha1.ConditionAccepted).Status != metav1.ConditionTrue {
		t.Fatalf("member2 has room for all 6: Accepted %+v, want True", condOf(mm, v1alpha1.ConditionAccepted))
	}
	lowest, writes := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, t0.Add(time.Second), 6)
	mm := reconcileMaintenance(t, r, c, name)
	t.Logf("writes %v, lowest Ready %d, progress %q", writes, lowest, mm.Status.Progress)
	if len(writes) < 3 {
		t.Errorf("writes %v: want the 3 replicas moved in make and break steps of at most 2", writes)
	}
	wantSteps(t, writes, "member2", 3)
	if lowest < 6 {
		t.Errorf("Ready fell to %d during the drain, want never below the user's 6", lowest)
	}
	if mm.Status.Moved == 0 || mm.Status.Share != 3 || !strings.Contains(mm.Status.Progress, "of 3 replicas moved off member1") {
		t.Errorf("mid-drain status %+v, want progress of 3", mm.Status)
	}
	lowest2, writes2 := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, t0.Add(31*time.Second), 8)
	wantSteps(t, writes2, "member2", writes[len(writes)-1]["member2"])
	if lowest2 < 6 {
		t.Errorf("Ready fell to %d during the drain, want never below the user's 6", lowest2)
	}
	got := specOf(t, c, key)
	if n := wantCounts(got); n["member1"] != 0 || n["member2"] != 6 || got.Spec.TotalReplicas != 6 {
		t.Fatalf("after the drain: spec %+v (%v), want member1 0, member2 6, total 6", got.Spec, n)
	}
	mm = reconcileMaintenance(t, r, c, name)
	if d := condOf(mm, v1alpha1.ConditionDrained); d.Status != metav1.ConditionTrue || mm.Status.Progress != "3 of 3 replicas moved off member1: drained" {
		t.Errorf("Drained %+v, progress %q: want True, 3 of 3 moved", d, mm.Status.Progress)
	}
}

// The drain moves member1's replicas off it stepwise, make before break,
// Ready never below the user's 6; the maintenance says how far it is.
func TestMaintenanceDrainsStepwise(t *testing.T) {
	r, c, fm, pol, key, _ := maintenanceFixture(t, "mm-steps", 20)
	drainMember1(t, r, c, fm, pol, key, "mm-steps")
}

// Refused for lack of room: member2's node takes one more pod, member1's
// 3 need room: refused naming the RSP and the 2 that would stay, with the
// same figure as plan --fail; nothing is written to the RSP. Forced, the
// one that fits moves, the other 2 wait for room on member1, and Ready
// never falls below 6.
func TestMaintenanceRefusedThenForced(t *testing.T) {
	r, c, fm, pol, key, user := maintenanceFixture(t, "mm-refused", 4)
	passAt(t, r, key, t0)
	publishStatus(t, r, c, pol)
	requestMaintenance(t, c, "mm-refused", "member1", false)
	mm := reconcileMaintenance(t, r, c, "mm-refused")
	acc := condOf(mm, v1alpha1.ConditionAccepted)
	if acc.Status != metav1.ConditionFalse || acc.Reason != v1alpha1.ReasonMaintenanceNoRoom || !strings.Contains(acc.Message, key.String()+": 2 of its 6 replicas") {
		t.Fatalf("Accepted %+v, want False %s naming %s and 2 of its 6", acc, v1alpha1.ReasonMaintenanceNoRoom, key)
	}
	if d := condOf(mm, v1alpha1.ConditionDrained); d.Status != metav1.ConditionFalse || d.Reason != v1alpha1.ReasonNotAccepted {
		t.Errorf("Drained %+v, want False %s", d, v1alpha1.ReasonNotAccepted)
	}
	wantEvent(t, r, v1alpha1.ReasonMaintenanceNoRoom)
	if v := testutil.ToFloat64(metrics.MaintenanceRefused.WithLabelValues("mm-refused", "member1")); v != 1 {
		t.Errorf("fedfailover_maintenance_refused = %v while refused, want 1", v)
	}
	_, writes := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, t0.Add(time.Second), 4)
	if len(writes) > 0 || !specPlacement(specOf(t, c, key)).Equal(user) {
		t.Fatalf("refused, the RSP was written: %v, want the user's spec untouched", writes)
	}

	orig := mm.DeepCopy()
	mm.Spec.Force = true
	if err := c.Patch(context.Background(), mm, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	mm = reconcileMaintenance(t, r, c, "mm-refused")
	if acc := condOf(mm, v1alpha1.ConditionAccepted); acc.Status != metav1.ConditionTrue || acc.Reason != v1alpha1.ReasonMaintenanceForced {
		t.Fatalf("forced: Accepted %+v, want True %s", acc, v1alpha1.ReasonMaintenanceForced)
	}
	lowest, writes := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, t0.Add(30*time.Second), 8)
	got := wantCounts(specOf(t, c, key))
	if got["member1"] != 2 || got["member2"] != 4 || specOf(t, c, key).Spec.TotalReplicas != 6 {
		t.Fatalf("forced drain with room for one: %v (writes %v), want member1 keeping the 2 that fit nowhere else", got, writes)
	}
	if lowest < 6 {
		t.Errorf("Ready fell to %d, want never below 6", lowest)
	}
	mm = reconcileMaintenance(t, r, c, "mm-refused")
	refused := testutil.ToFloat64(metrics.MaintenanceRefused.WithLabelValues("mm-refused", "member1"))
	waiting := testutil.ToFloat64(metrics.MaintenanceReplicas.WithLabelValues("mm-refused", "member1", "waiting_for_room"))
	if refused != 0 || waiting != 2 {
		t.Errorf("forced: fedfailover_maintenance_refused = %v, waiting_for_room = %v; want 0, 2", refused, waiting)
	}
	if d := condOf(mm, v1alpha1.ConditionDrained); d.Reason != v1alpha1.ReasonWaitingForRoom || mm.Status.WaitingForRoom != 2 ||
		mm.Status.Progress != "1 of 3 replicas moved off member1, 2 waiting for room on the other members" {
		t.Errorf("Drained %+v, status %+v: want WaitingForRoom, 1 of 3 moved, 2 waiting", d, mm.Status)
	}
}

// Ended: the maintenance deleted, the replicas come back through the
// failback: nothing before the stabilization window (20s from the end),
// then maxStep at a time, make before break, Ready never below 6, to the
// user's own spec, and no write after that (no flapping).
func TestMaintenanceEndedFailsBack(t *testing.T) {
	r, c, fm, pol, key, user := maintenanceFixture(t, "mm-ended", 20)
	drainMember1(t, r, c, fm, pol, key, "mm-ended")
	if err := c.Delete(context.Background(), &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "mm-ended"}}); err != nil {
		t.Fatal(err)
	}
	end := t0.Add(2 * time.Minute)
	_, early := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, end, 4) // passes at end .. end+15s
	if len(early) > 0 {
		t.Fatalf("writes %v within the 20s stabilization window after the end, want none", early)
	}
	lowest, writes := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, end.Add(20*time.Second), 14)
	t.Logf("failback writes %v, lowest Ready %d", writes, lowest)
	wantSteps(t, writes, "member1", 0)
	prev := 0
	for _, w := range writes {
		if w["member1"] < prev {
			t.Errorf("member1 went back from %d to %d: the failback flapped (%v)", prev, w["member1"], writes)
		}
		prev = w["member1"]
	}
	if lowest < 6 {
		t.Errorf("Ready fell to %d during the failback, want never below 6", lowest)
	}
	if got := specPlacement(specOf(t, c, key)); !got.Equal(user) {
		t.Fatalf("after the failback: spec %+v, want the user's %+v", got, user)
	}
	if _, more := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, end.Add(3*time.Minute), 4); len(more) > 0 {
		t.Errorf("writes %v after the user's spec was back, want none", more)
	}
}

// wantEvent fails unless an event with reason was recorded.
func wantEvent(t *testing.T, r *Reconciler, reason string) {
	t.Helper()
	for _, ev := range drain(r.recorder.(*events.FakeRecorder).Events) {
		if strings.Contains(ev, " "+reason+" ") {
			return
		}
	}
	t.Errorf("no event with reason %s", reason)
}

// Just accepted, before any pass drained an RSP that places replicas on
// the member (as published): the maintenance is not reported drained.
// Once the passes drained it, it is.
func TestMaintenanceNotDrainedBeforeEveryRSPWasSeen(t *testing.T) {
	mm := &v1alpha1.MemberMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", Generation: 1}, Spec: v1alpha1.MemberMaintenanceSpec{Member: "member1"}}
	acc := metav1.Condition{Type: v1alpha1.ConditionAccepted, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonMaintenanceAccepted, ObservedGeneration: 1}
	published := []v1alpha1.RSPReadiness{{Namespace: "ns", Name: "web", TotalReplicas: 6,
		Members: []v1alpha1.MemberReadiness{{Name: "member1", Replicas: 3, Room: 6}, {Name: "member2", Replicas: 3, Room: 6}}}}
	st := progressStatus(mm, acc, drainsOf("member1", map[types.NamespacedName]planner.DrainProgress{}, published))
	if d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDrained); d.Status != metav1.ConditionFalse || st.Progress != "0 of 3 replicas moved off member1" {
		t.Errorf("no pass yet: Drained %+v, progress %q; want False, 0 of 3 moved", d, st.Progress)
	}
	done := map[types.NamespacedName]planner.DrainProgress{{Namespace: "ns", Name: "web"}: {Share: 3, Moved: 3}}
	st = progressStatus(mm, acc, drainsOf("member1", done, published))
	if d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDrained); d.Status != metav1.ConditionTrue {
		t.Errorf("drained by the passes: Drained %+v, want True", d)
	}
}
