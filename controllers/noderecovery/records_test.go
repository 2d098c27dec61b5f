package noderecovery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// setReady rewrites n1's Ready condition in the member.
func (w *recoveryWorld) setReady(status corev1.ConditionStatus, since time.Time) {
	w.t.Helper()
	n := w.node("n1")
	n.Status.Conditions[0].Status, n.Status.Conditions[0].LastTransitionTime = status, metav1.NewTime(since)
	if err := w.member.Status().Update(context.Background(), n); err != nil {
		w.t.Fatal(err)
	}
}

// Scenario 6: an out-of-service taint that was on the node before
// fedfailover acted (an admin, self-node-remediation, fence agents) is never
// removed by it, even when fedfailover recovered the node's pods.
func TestPreexistingTaintIsNeverRemoved(t *testing.T) {
	admin := lostNode("n1", t0.Add(-time.Minute))
	admin.Spec.Taints = []corev1.Taint{OutOfServiceTaint} // exactly the taint fedfailover would add
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(),
		admin, readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true), boundClaim("data-db-0", "pv-db-0"))
	w.passLost()
	rec := w.record("n1")
	if rec == nil || !rec.Status.TaintPreexisting || recordedOf(rec).OwnsTaint {
		t.Fatalf("record %+v: want the taint recorded as pre-existing", rec)
	}
	if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("the fenced node's pod was not released")
	}
	w.setReady(corev1.ConditionTrue, w.now)
	w.now = w.now.Add(time.Second)
	w.pass()
	if !nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("fedfailover removed an out-of-service taint it did not add")
	}
	if !w.finished("n1") {
		t.Fatalf("record not finished: %+v", w.record("n1").Status)
	}
}

// Scenario 6 with forged marks: a Ready node with an admin's taint and every
// annotation fedfailover ever wrote (tainted-by included) keeps its taint;
// the old code removed it on the mark's word.
func TestForgedMarksOnReadyNodeKeepTheTaint(t *testing.T) {
	n := readyNode("n1")
	n.Spec.Taints = []corev1.Taint{OutOfServiceTaint}
	n.Annotations = contract.NodeMarks{LostSince: t0.Add(-time.Hour), FencedBy: "MachineInfrastructureDeleted", FencedAt: t0.Add(-time.Hour),
		Action: v1alpha1.RecoveryMethodOutOfServiceTaint, TaintedByUs: true}.Annotations()
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, livingMachine(), n)
	for range 3 {
		w.pass()
		w.now = w.now.Add(6 * time.Second)
	}
	got := w.node("n1")
	if !nodeHasOOSTaint(got) {
		t.Fatal("a forged tainted-by mark made fedfailover remove an admin's taint")
	}
	if contract.HasNodeMarks(got.Annotations) {
		t.Fatalf("the forged annotations stay on the node: %v", got.Annotations)
	}
}

// Scenario 8: a powered-off node's Ready condition goes False, then Unknown
// when the node lifecycle controller takes over; then the node comes back.
// The flip keeps the recovery (and the taint); only Ready, once the tracked
// volume is detached, removes the taint. The old code took the flip's new
// transition time for a new loss and removed the taint.
func TestFalseToUnknownFlipKeepsTheTaint(t *testing.T) {
	n := lostNode("n1", t0.Add(-time.Minute))
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(),
		n, readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true), boundClaim("data-db-0", "pv-db-0"))
	w.passLost()
	first := w.record("n1")
	if !nodeHasOOSTaint(w.node("n1")) || first == nil || first.Status.ObservedAt == nil {
		t.Fatalf("not tainted, or no record with the sighting: %+v", first)
	}
	w.now = w.now.Add(40 * time.Second)
	w.setReady(corev1.ConditionUnknown, w.now)
	for range 3 {
		w.now = w.now.Add(5 * time.Second)
		w.pass()
	}
	if !nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("the False to Unknown flip removed the taint of a powered-off node")
	}
	if rec := w.record("n1"); rec == nil || rec.Name != first.Name || rec.Status.Phase == v1alpha1.RecoveryPhaseFinished ||
		rec.Status.ReadyStatus != string(corev1.ConditionUnknown) || !rec.Status.ActedAt.Equal(first.Status.ActedAt) {
		t.Fatalf("record after the flip: %+v, want the first one still active, following the Unknown condition", rec)
	}
	w.setReady(corev1.ConditionTrue, w.now)
	w.pass()
	if nodeHasOOSTaint(w.node("n1")) || !w.finished("n1") {
		t.Fatal("the taint fedfailover added stayed on the Ready node")
	}
}

// Scenario 5: whatever the member's clock says (its Ready transition an hour
// in the past, or ten minutes in the future), nothing happens before the
// host has seen the node not Ready for notReadyFor, and everything happens
// after.
func TestMemberClockSkewDoesNotChangeTiming(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, -10 * time.Minute, 10 * time.Minute} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(),
				lostNode("n1", t0.Add(skew)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true), boundClaim("data-db-0", "pv-db-0"))
			w.pass()
			w.now = w.now.Add(9 * time.Second)
			w.pass()
			if nodeHasOOSTaint(w.node("n1")) || w.record("n1") != nil {
				t.Fatal("acted before the host saw the node lost for notReadyFor (10s)")
			}
			w.now = w.now.Add(2 * time.Second)
			w.pass()
			if !nodeHasOOSTaint(w.node("n1")) {
				t.Fatal("not acted on once the host saw the node lost for notReadyFor")
			}
		})
	}
}

// A restart between the intent and the action: the next manager (no
// memory, only the record) completes the action, with proof computed again,
// and the taint is still known to be fedfailover's; without proof now it
// does nothing. The record's times are another process's: the new manager
// waits notReadyFor from its own sighting before it writes anything.
func TestRestartBetweenIntentAndAction(t *testing.T) {
	setup := func(t *testing.T, machineDeleted bool) *recoveryWorld {
		m := livingMachine()
		if machineDeleted {
			m = deletedMachine()
		}
		w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, m,
			lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true), boundClaim("data-db-0", "pv-db-0"))
		// What a manager killed right after writing the intent leaves behind.
		w.seedRecord(t, v1alpha1.RecoveryPhaseActing, v1alpha1.RecoveryMethodOutOfServiceTaint, false)
		return w
	}
	// waitOwnNotReadyFor: the first pass of the new manager writes nothing;
	// notReadyFor (10 s) later by its own clock, it goes on.
	waitOwnNotReadyFor := func(t *testing.T, w *recoveryWorld) {
		t.Helper()
		w.pass()
		if nodeHasOOSTaint(w.node("n1")) || w.record("n1").Status.ActedAt != nil || w.record("n1").Status.Phase == v1alpha1.RecoveryPhaseBlocked {
			t.Fatalf("taint %v, record %+v: the new manager acted on the record's times, before its own notReadyFor",
				w.node("n1").Spec.Taints, w.record("n1").Status)
		}
		w.now = w.now.Add(11 * time.Second)
		w.pass()
	}
	t.Run("evidence still there: the action is completed", func(t *testing.T) {
		w := setup(t, true)
		waitOwnNotReadyFor(t, w)
		rec := w.record("n1")
		if !nodeHasOOSTaint(w.node("n1")) || rec.Status.ActedAt == nil || !recordedOf(rec).OwnsTaint {
			t.Fatalf("taint %v, record %+v: want the recorded intent completed", w.node("n1").Spec.Taints, rec.Status)
		}
	})
	t.Run("no evidence now: nothing is done", func(t *testing.T) {
		w := setup(t, false)
		waitOwnNotReadyFor(t, w)
		if nodeHasOOSTaint(w.node("n1")) || !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
			t.Fatal("a recorded intent alone got the node tainted or its pod deleted")
		}
		if rec := w.record("n1"); rec.Status.Phase != v1alpha1.RecoveryPhaseBlocked || rec.Status.ActedAt != nil {
			t.Fatalf("record %+v, want Blocked and no action", rec.Status)
		}
	})
}

// Finished records are kept for the retention period and at most
// MaxFinishedRecords per member.
func TestFinishedRecordsExpire(t *testing.T) {
	w := newRecoveryWorld(t, policy(), false, nil, readyNode("n2"))
	w.r.opts.MaxFinishedRecords = 2
	ctx := context.Background()
	for i, age := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 100 * time.Hour} {
		rec := &v1alpha1.NodeRecovery{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("member1.n%d.x", i)},
			Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: fmt.Sprintf("n%d", i)}}
		if err := w.host.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		rec.Status = v1alpha1.NodeRecoveryRecordStatus{Phase: v1alpha1.RecoveryPhaseFinished, FinishedAt: metaTimePtr(t0.Add(-age))}
		if err := w.host.Status().Update(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	w.pass()
	var list v1alpha1.NodeRecoveryList
	if err := w.host.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	if len(names) != 2 || names[0] != "member1.n0.x" || names[1] != "member1.n1.x" {
		t.Fatalf("records kept: %v, want the two newest", names)
	}
}

// A loss closed for want of a policy and taken up again by a new one gets a
// new record next to the finished one (same loss, same deterministic name).
func TestLossTakenUpAgainGetsANewRecord(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, livingMachine(),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"))
	ctx := context.Background()
	w.passLost()
	first := w.record("n1")
	if first == nil || first.Status.Phase != v1alpha1.RecoveryPhaseBlocked {
		t.Fatalf("record %+v, want Blocked", first)
	}
	setNodeRecovery := func(enabled bool) {
		pol := &v1alpha1.FailoverPolicy{}
		if err := w.host.Get(ctx, client.ObjectKey{Name: "p"}, pol); err != nil {
			t.Fatal(err)
		}
		pol.Spec.NodeRecovery.Enabled = ptr.To(enabled)
		if err := w.host.Update(ctx, pol); err != nil {
			t.Fatal(err)
		}
	}
	setNodeRecovery(false)
	w.pass()
	if !w.finished("n1") {
		t.Fatalf("record not finished without a policy: %+v", w.record("n1").Status)
	}
	setNodeRecovery(true)
	w.now = w.now.Add(time.Second)
	w.pass()
	again := w.record("n1")
	if again == nil || again.Name == first.Name || again.Status.Phase != v1alpha1.RecoveryPhaseBlocked {
		t.Fatalf("record %+v after the policy came back, want a new Blocked one", again)
	}
}

// Scenario 7: a member that cannot be reached keeps fedfailover's taint;
// the policy says which node carries it and why it cannot go.
func TestUnreachableMemberReportsItsTaints(t *testing.T) {
	w := newRecoveryWorld(t, policy(), false, nil)
	ctx := context.Background()
	rec := actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, t0)
	rec.Name, rec.Spec.Cluster, rec.Spec.Node, rec.Spec.Policy = "member2.n1.x", "member2", "n1", "p"
	st := rec.Status
	if err := w.host.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Status = st
	if err := w.host.Status().Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "member2"}}); err != nil {
		t.Fatal(err)
	}
	reps, _ := w.r.store.reports.Snapshot("p")
	if left := reps["member2"].TaintsLeft; len(left) != 1 || !strings.Contains(left[0], "node n1 of member member2 cannot be removed while the member is unreachable") {
		t.Fatalf("TaintsLeft %v, want the taint on member2/n1 explained", left)
	}
}

// Dry run applies to every destructive write, whatever a record says: a
// policy switched to dryRun after a ForceDelete recovery was recorded as
// acted (or a record migrated from node marks) deletes nothing more.
func TestDryRunStopsAnActedRecovery(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodForceDelete), true, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true), boundClaim("data-db-0", "pv-db-0"))
	w.seedRecord(t, v1alpha1.RecoveryPhaseRecovering, v1alpha1.RecoveryMethodForceDelete, true)
	for range 3 {
		w.pass()
		w.now = w.now.Add(11 * time.Second)
	}
	if !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
		t.Fatal("dry run: the pod of an acted recovery was force-deleted")
	}
	if msg := w.record("n1").Status.Message; !strings.Contains(msg, "dry run: nothing more is written") {
		t.Errorf("record message %q, want it to say dry run stops the next step", msg)
	}
}

// seedRecord writes the record of n1's loss that another manager left: its
// intent (method, evidence, claims) 20 s ago and, when acted, its action.
func (w *recoveryWorld) seedRecord(t *testing.T, phase v1alpha1.RecoveryPhase, method v1alpha1.RecoveryMethod, acted bool) {
	t.Helper()
	at := metav1.NewTime(t0.Add(-20 * time.Second))
	since := metav1.NewTime(t0.Add(-time.Minute))
	rec := &v1alpha1.NodeRecovery{ObjectMeta: metav1.ObjectMeta{Name: "member1.n1.x"},
		Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: "n1", NodeUID: "uid-n1", Policy: "p"}}
	if err := w.host.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	rec.Status = v1alpha1.NodeRecoveryRecordStatus{Phase: phase, Method: method,
		Evidence: "MachineInfrastructureDeleted", IntentAt: &at, ObservedAt: &at, ReadyObservedAt: &at,
		ReadyStatus: string(corev1.ConditionUnknown), ReadySince: &since, Claims: []string{"default/data-db-0"}}
	if acted {
		rec.Status.ActedAt = &at
	}
	if err := w.host.Status().Update(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
}

// An active record an older version made carries an owner reference to its
// policy: the next pass drops it, so no garbage collection (a foreground
// deletion of the policy) can take the proof that a taint is fedfailover's.
func TestActiveRecordIsReleasedFromItsOwners(t *testing.T) {
	w := newRecoveryWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), false, deletedMachine(),
		lostNode("n1", t0.Add(-time.Minute)), readyNode("n2"), claimPod("db-0", "n1", "data-db-0", true), boundClaim("data-db-0", "pv-db-0"))
	w.seedRecord(t, v1alpha1.RecoveryPhaseRecovering, v1alpha1.RecoveryMethodOutOfServiceTaint, true)
	rec := w.record("n1")
	base := rec.DeepCopy()
	rec.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "FailoverPolicy", Name: "p", UID: "uid-p"}}
	if err := w.host.Patch(context.Background(), rec, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	w.pass()
	if got := w.record("n1"); got == nil || len(got.OwnerReferences) != 0 {
		t.Fatalf("record %+v after a pass, want it active and without owner references", got)
	}
}
