package noderecovery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/poll"
)

// The gates of every destructive write (docs/safety.md, rules 6-8, 15 and
// 19) through real API servers and the production member cache, on the
// harness of evidence_envtest_test.go: the counterparts of
// TestDryRunStopsAnActedRecovery, TestRestartBetweenIntentAndAction and
// TestOrphanNode, which run on fake clients.

// TestGatesApplyToEveryActOfARecord: a record that says a recovery was
// acted on never lets a later write skip a gate. The node is lost by
// evidence, tainted out of service and its pod force-deleted; then a stale
// scheduler binds a replacement onto the fenced node. (a) With the policy
// switched to dry run, two minutes of passes leave the replacement alone,
// and the policy status and the record say dry run stopped the next step.
// (b) Out of dry run but paused, the same. (d) Unpaused while the other
// node is lost too (two of two, more than maxUnhealthy 50 %), the storm
// guard alone holds it, through the storm and its cooldown. (c) Once the
// cooldown has passed, the replacement is deleted: the gates held it,
// nothing else did.
func TestGatesApplyToEveryActOfARecord(t *testing.T) {
	a := startActed(t, "gates-acts")
	e, cluster, w, k, k2, ns := a.e, a.cluster, a.w, a.k, a.k2, a.ns
	acted := w.record(k.node.Name)
	if acted == nil || acted.Status.ActedAt == nil || acted.Status.Method != v1alpha1.RecoveryMethodOutOfServiceTaint {
		t.Fatalf("record %+v, want an acted OutOfServiceTaint recovery", acted)
	}

	// (a) Dry run. The stale scheduler binds the replacement once the
	// policy is in dry run, as the member cache shows it.
	w.setPolicy(func(s *v1alpha1.FailoverPolicySpec) { s.DryRun = true })
	repl := e.pod(t, ns, "db-0", k.node.Name)
	w.podCached(repl)
	w.holdFor(repl, 2*time.Minute, 5*time.Second, "dry run")
	if st := w.entry(k.node.Name); st == nil || !strings.Contains(st.Message, "dry run: nothing more is written (next step: ForceDelete)") {
		t.Errorf("dry run: policy status entry %+v, want it to say dry run stopped the force deletion", st)
	}
	if rec := w.record(k.node.Name); rec.Name != acted.Name || !rec.Status.DryRun || !strings.Contains(rec.Status.Message, "dry run: nothing more is written") {
		t.Errorf("dry run: record %s %+v, want %s marked dryRun, saying dry run stopped the next step", rec.Name, rec.Status, acted.Name)
	}

	// (b) Paused, out of dry run.
	w.setPolicy(func(s *v1alpha1.FailoverPolicySpec) { s.DryRun, s.Paused = false, true })
	w.holdFor(repl, 2*time.Minute, 5*time.Second, "paused")
	if st := w.entry(k.node.Name); st == nil || !strings.Contains(st.Message, "policy paused, nothing written (next step: ForceDelete)") {
		t.Errorf("paused: policy status entry %+v, want it to say the pause stopped the force deletion", st)
	}

	// (d) The storm guard. The other node is lost by evidence too while the
	// policy is paused; then the pause is lifted, and the storm alone holds
	// every write.
	e.machine(t, cluster, k2.node.Name, true)
	w.seenByCache(k2, true)
	w.firstReading(k2)
	w.advance(15 * time.Second)
	w.passUntil("the storm", func() error {
		if rep := w.report(); !rep.Storm {
			return fmt.Errorf("no storm: %q", rep.StormMessage)
		}
		return nil
	})
	w.setPolicy(func(s *v1alpha1.FailoverPolicySpec) { s.Paused = false })
	w.holdFor(repl, time.Minute, 5*time.Second, "storm")
	if st := w.entry(k.node.Name); st == nil || !strings.Contains(st.Message, "nothing more is written now: recovery suspended in this member") {
		t.Errorf("storm: policy status entry %+v, want it to say the storm guard stopped the next write", st)
	}
	if n := k2.live(t); tainted(n) || lostTainted(n) {
		t.Fatalf("storm: the second lost node was tainted: %v", n.Spec.Taints)
	}
	// The storm ends: the second node's kubelet renews its Lease, and its
	// Machine goes (no evidence left about it).
	k2.renew(t)
	e.releaseMachine(t, k2.node.Name)
	w.seenByCache(k2, false)
	w.advance(2 * time.Second)
	var endedAt time.Time
	w.passUntil("the storm over, cooling down", func() error {
		if rec := w.record(k2.node.Name); rec != nil && rec.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return fmt.Errorf("the second node's record is %s: %s", rec.Status.Phase, rec.Status.Message)
		}
		g := &v1alpha1.RecoveryGuard{}
		if err := w.e.mgr.GetClient().Get(context.Background(), client.ObjectKey{Name: cluster}, g); err != nil {
			return err
		}
		if !g.Status.StormActive || g.Status.StormEndedAt == nil {
			return fmt.Errorf("guard %+v, want a storm cooling down", g.Status)
		}
		endedAt = g.Status.StormEndedAt.Time
		return nil
	})
	// The default stormCooldown is 5 min: four of them still hold.
	w.holdFor(repl, 4*time.Minute, 30*time.Second, "storm cooldown")
	if st := w.entry(k.node.Name); st == nil || !strings.Contains(st.Message, "recovery suspended in this member") {
		t.Errorf("cooldown: policy status entry %+v, want it to say the storm guard still holds", st)
	}

	// (c) Past the cooldown, no gate is left: the replacement goes.
	w.advance(endedAt.Add(5*time.Minute + time.Second).Sub(w.clock()))
	w.passUntil("the replacement force-deleted", func() error { return w.podGone(repl) })
	if rep := w.report(); rep.Storm {
		t.Errorf("still suspended after the cooldown: %q", rep.StormMessage)
	}
	if rec := w.record(k.node.Name); rec.Name != acted.Name || rec.Status.DryRun {
		t.Errorf("record %s %+v, want %s, no longer marked dryRun", rec.Name, rec.Status, acted.Name)
	}
}

// TestGatesRestartMeasuresWaitsFromItsOwnSightings: after a restart, the
// wait for notReadyFor (30 s, detection NotReady) starts from the new
// process's own first sighting, never from the times a record carries. A
// first process sees the node Ready=Unknown (since an hour ago on the
// member's clock), its Machine's infrastructure gone, records its intent
// after notReadyFor and stops before its taint patch; the record's times
// are then back-dated an hour (another replica's clock, or a forged status
// patch). The new process writes nothing in its first passes nor 29 s
// after its first sighting, and taints (and force-deletes the pod) once
// 30 s of its own clock have passed.
func TestGatesRestartMeasuresWaitsFromItsOwnSightings(t *testing.T) {
	e, cluster, w, k, _ := startEvidenceMember(t, "gates-restart", v1alpha1.NodeLossDetectionNotReady)
	e.machine(t, cluster, k.node.Name, true)
	ns := e.namespace(t, cluster)
	pod := e.pod(t, ns, "db-0", k.node.Name)
	w.seenByCache(k, true)
	w.podCached(pod)
	k.markUnknown(t, time.Now().Add(-time.Hour))

	// The first process: its taint patch never goes out (it stops there).
	w.members.mu.Lock()
	w.members.failNodePatch = func(name string) error {
		if name == k.node.Name {
			return fmt.Errorf("the process stopped before its taint patch")
		}
		return nil
	}
	w.members.mu.Unlock()
	w.passUntil("the first process's sighting", func() error {
		if w.lossSeenAt(k).IsZero() {
			return fmt.Errorf("not seen")
		}
		return nil
	})
	w.advance(31 * time.Second)
	w.intentRecorded(k)
	intent := w.record(k.node.Name)
	if intent.Status.ActedAt != nil || tainted(k.live(t)) || w.podGone(pod) == nil {
		t.Fatalf("record %+v, taints %v: want the intent only, nothing written", intent.Status, k.live(t).Spec.Taints)
	}

	// Its times, back-dated an hour.
	old := metav1.NewTime(w.clock().Add(-time.Hour).Truncate(time.Second))
	base := intent.DeepCopy()
	intent.Status.ObservedAt, intent.Status.ReadyObservedAt, intent.Status.IntentAt = &old, &old, &old
	must(t, e.host.Status().Patch(context.Background(), intent, client.MergeFrom(base)))
	poll.T(t, 30*time.Second, 50*time.Millisecond, "the host cache to hold the back-dated record", poll.NoError(func() error {
		rec := &v1alpha1.NodeRecovery{}
		if err := w.e.mgr.GetClient().Get(context.Background(), client.ObjectKeyFromObject(intent), rec); err != nil {
			return err
		}
		if rec.Status.IntentAt == nil || !rec.Status.IntentAt.Equal(&old) {
			return fmt.Errorf("intent at %v", rec.Status.IntentAt)
		}
		return nil
	}))

	// A new process.
	w.members.mu.Lock()
	w.members.failNodePatch = nil
	w.members.mu.Unlock()
	w.r = w.reconciler()
	first := w.clock()
	for range 3 {
		must(t, w.pass())
	}
	if at := w.lossSeenAt(k); !at.Equal(first) {
		t.Fatalf("the new process's sighting is at %v, want its own first pass at %v", at, first)
	}
	w.checkNothingWritten(k, pod, "in the new process's first passes")
	if st := w.entry(k.node.Name); st == nil || !strings.Contains(st.Message, "waiting for notReadyFor") {
		t.Errorf("policy status entry %+v, want it to say notReadyFor is awaited", st)
	}
	w.advance(29 * time.Second)
	must(t, w.pass())
	w.checkNothingWritten(k, pod, "29 s after the new process's first sighting")
	w.advance(2 * time.Second)
	w.passUntil("the taint and db-0 force-deleted", func() error {
		if !tainted(k.live(t)) {
			return fmt.Errorf("not tainted")
		}
		return w.podGone(pod)
	})
	if rec := w.record(k.node.Name); rec.Name != intent.Name || rec.Status.ActedAt == nil || !recordedOf(rec).OwnsTaint {
		t.Fatalf("record %s %+v, want %s acted, the taint fedfailover's", rec.Name, rec.Status, intent.Name)
	}
}

// TestGatesDeletedNodeNeedsTheRecordedMachine: a Node deleted from the
// member while its pod stays bound to it is recovered on the evidence of
// its own Machine only, the one its record names (UID and providerID). The
// node is lost (Ready=Unknown, detection NotReady) while its Machine runs:
// Blocked, and the record names that Machine. Then the Node is deleted.
// With another Machine under the same name (another UID, another
// providerID), deleted with its infrastructure gone, the pod is never
// force-deleted, and the policy status says Blocked, naming the mismatch.
// With the recorded Machine deleted and its infrastructure gone, the pod
// is force-deleted.
func TestGatesDeletedNodeNeedsTheRecordedMachine(t *testing.T) {
	// setup loses the node while its Machine runs, then deletes the Node.
	setup := func(t *testing.T, base string) (*evidenceEnv, *evidenceWorld, *kubelet, *corev1.Pod, *clusterv1.Machine) {
		e, cluster, w, k, _ := startEvidenceMember(t, base, v1alpha1.NodeLossDetectionNotReady)
		m := e.machineFor(t, cluster, k.node.Name, k.node.Spec.ProviderID)
		ns := e.namespace(t, cluster)
		pod := e.pod(t, ns, "db-0", k.node.Name)
		w.seenByCache(k, true)
		w.podCached(pod)
		k.markUnknown(t, time.Now())
		w.passUntil("the loss seen", func() error {
			if w.lossSeenAt(k).IsZero() {
				return fmt.Errorf("not seen")
			}
			return nil
		})
		w.advance(31 * time.Second)
		w.passUntil("the loss recorded, Blocked", func() error {
			rec := w.record(k.node.Name)
			if rec == nil || rec.Status.Phase != v1alpha1.RecoveryPhaseBlocked {
				return fmt.Errorf("record %v", rec)
			}
			return nil
		})
		rec := w.record(k.node.Name)
		if rec.Spec.Machine == nil || rec.Spec.Machine.UID != string(m.UID) || rec.Spec.ProviderID != k.node.Spec.ProviderID {
			t.Fatalf("record spec %+v, want it to name Machine %s and providerID %s", rec.Spec, m.UID, k.node.Spec.ProviderID)
		}
		must(t, e.member.Delete(context.Background(), k.node))
		poll.T(t, 30*time.Second, 100*time.Millisecond, "the member cache to drop node "+k.node.Name, poll.NoError(func() error {
			cl, err := e.cache.GetClient(context.Background(), cluster)
			if err != nil {
				return err
			}
			switch err := cl.Get(context.Background(), client.ObjectKeyFromObject(k.node), &corev1.Node{}); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			}
			return fmt.Errorf("still cached")
		}))
		// Its Machine runs: no evidence yet.
		for range 3 {
			w.advance(5 * time.Second)
			must(t, w.pass())
			must(t, w.stillBound(pod))
		}
		if st := w.entry(k.node.Name); st == nil || st.Phase != v1alpha1.RecoveryPhaseBlocked || !strings.HasPrefix(st.Message, "Node deleted; ") {
			t.Fatalf("policy status entry %+v, want the deleted node Blocked", st)
		}
		return e, w, k, pod, m
	}

	t.Run("another Machine under the node's name", func(t *testing.T) {
		e, w, k, pod, recorded := setup(t, "gates-orphan")
		// The recorded Machine goes; a Machine of another host takes its
		// name and its nodeRef, and is deleted with its infrastructure gone.
		e.releaseMachine(t, recorded.Name)
		other := e.machineFor(t, w.cluster, k.node.Name, k.node.Spec.ProviderID+"-replacement")
		e.infrastructureDeleted(t, other)
		w.machineCached(k.node.Name, other.UID)
		for range 12 {
			w.advance(5 * time.Second)
			must(t, w.pass())
			if err := w.stillBound(pod); err != nil {
				t.Fatalf("the deleted node's pod went on the evidence of a Machine that is not the recorded one: %v", err)
			}
		}
		st := w.entry(k.node.Name)
		if st == nil || st.Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(st.Message, "another Machine under the same name") ||
			!strings.Contains(st.Message, string(recorded.UID)) {
			t.Fatalf("policy status entry %+v, want Blocked, naming the Machine mismatch with the recorded UID %s", st, recorded.UID)
		}
		if rec := w.record(k.node.Name); rec == nil || rec.Status.Phase == v1alpha1.RecoveryPhaseFinished || rec.Spec.Machine.UID != string(recorded.UID) {
			t.Fatalf("record %+v, want it active, naming the recorded Machine", rec)
		}
	})

	t.Run("the recorded Machine", func(t *testing.T) {
		e, w, k, pod, recorded := setup(t, "gates-orphan-own")
		e.infrastructureDeleted(t, recorded)
		w.machineCached(k.node.Name, recorded.UID)
		w.advance(5 * time.Second)
		w.passUntil("the deleted node's pod force-deleted", func() error { return w.podGone(pod) })
		if st := w.entry(k.node.Name); st != nil && st.Phase == v1alpha1.RecoveryPhaseBlocked {
			t.Fatalf("policy status entry %+v, want it not Blocked", st)
		}
	})
}

// setPolicy changes the spec of the member's policy and waits until the
// host cache, which the reconciler reads it from, holds the change.
func (w *evidenceWorld) setPolicy(mut func(*v1alpha1.FailoverPolicySpec)) {
	w.t.Helper()
	ctx := context.Background()
	var want v1alpha1.FailoverPolicySpec
	must(w.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.FailoverPolicy{}
		if err := w.e.host.Get(ctx, client.ObjectKey{Name: w.cluster}, p); err != nil {
			return err
		}
		mut(&p.Spec)
		if err := w.e.host.Update(ctx, p); err != nil {
			return err
		}
		want = p.Spec
		return nil
	}))
	poll.T(w.t, 30*time.Second, 50*time.Millisecond, "the host cache to hold the policy change", poll.NoError(func() error {
		p := &v1alpha1.FailoverPolicy{}
		if err := w.e.mgr.GetClient().Get(ctx, client.ObjectKey{Name: w.cluster}, p); err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(p.Spec, want) {
			return fmt.Errorf("dryRun %v, paused %v", p.Spec.DryRun, p.Spec.Paused)
		}
		return nil
	}))
}

// holdFor runs a pass every step of the clock for d, and fails the test as
// soon as the pod is deleted.
func (w *evidenceWorld) holdFor(p *corev1.Pod, d, step time.Duration, gate string) {
	w.t.Helper()
	for at := step; at <= d; at += step {
		w.advance(step)
		must(w.t, w.pass())
		if err := w.stillBound(p); err != nil {
			w.t.Fatalf("%s: %s after the gate was set: %v", gate, at, err)
		}
	}
}

// stillBound: this pod (its UID) exists in the member and is not deleting.
func (w *evidenceWorld) stillBound(p *corev1.Pod) error {
	cur := &corev1.Pod{}
	if err := w.e.member.Get(context.Background(), client.ObjectKeyFromObject(p), cur); err != nil {
		return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if cur.UID != p.UID || cur.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s/%s %s was deleted", p.Namespace, p.Name, p.UID)
	}
	return nil
}

// checkNothingWritten: the node carries no out-of-service taint, its pod
// is there and its record says nothing was done.
func (w *evidenceWorld) checkNothingWritten(k *kubelet, p *corev1.Pod, when string) {
	w.t.Helper()
	if n := k.live(w.t); tainted(n) {
		w.t.Fatalf("%s: tainted (%v)", when, n.Spec.Taints)
	}
	if err := w.stillBound(p); err != nil {
		w.t.Fatalf("%s: %v", when, err)
	}
	if rec := w.record(k.node.Name); rec == nil || rec.Status.ActedAt != nil {
		w.t.Fatalf("%s: record %+v, want the intent only", when, rec)
	}
}

// report is the reconciler's last report of the member.
func (w *evidenceWorld) report() memberReport {
	reps, _ := w.r.store.reports.Snapshot(w.cluster)
	return reps[w.cluster]
}

// entry is the node's entry in the member's last report (nil: none).
func (w *evidenceWorld) entry(node string) *v1alpha1.NodeRecoveryStatus {
	for _, st := range w.report().Recoveries {
		if st.Node == node {
			return &st
		}
	}
	return nil
}

// lossSeenAt is when the reconciler's process first saw the node not Ready
// (zero: it has not).
func (w *evidenceWorld) lossSeenAt(k *kubelet) time.Time {
	w.r.sightings.mu.Lock()
	defer w.r.sightings.mu.Unlock()
	return w.r.sightings.m[w.cluster+"/"+k.node.Name].lossAt
}

// machineCached waits until the host cache maps node to the Machine uid,
// being deleted.
func (w *evidenceWorld) machineCached(node string, uid types.UID) {
	w.t.Helper()
	poll.T(w.t, 30*time.Second, 100*time.Millisecond, "the host cache to hold the Machine of "+node, poll.NoError(func() error {
		ms, err := w.e.cache.MachinesByNode(context.Background(), w.cluster)
		if err != nil {
			return err
		}
		m := ms[node]
		if m == nil || m.UID != uid || m.DeletionTimestamp == nil {
			return fmt.Errorf("Machine of %s: %v", node, m)
		}
		return nil
	}))
}

// markUnknown turns the node's Ready condition Unknown, as the node
// lifecycle controller does for a silent kubelet (since: the member's
// clock).
func (k *kubelet) markUnknown(t *testing.T, since time.Time) {
	t.Helper()
	n := k.live(t)
	n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
	n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(since.Truncate(time.Second))
	must(t, k.e.member.Status().Update(context.Background(), n))
}

// machineFor creates a running Machine named node in the member's Cluster,
// its nodeRef naming node, with providerID; a finalizer holds it when it is
// deleted.
func (e *evidenceEnv) machineFor(t *testing.T, cluster, node, providerID string) *clusterv1.Machine {
	t.Helper()
	ctx := context.Background()
	m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: node,
		Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}, Finalizers: []string{"test.fedfailover.io/hold"}},
		Spec: clusterv1.MachineSpec{ClusterName: cluster, ProviderID: providerID,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap-" + node)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.test.io", Kind: "TestMachine", Name: node}}}
	must(t, e.host.Create(ctx, m))
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: node}
	must(t, e.host.Status().Update(ctx, m))
	return m
}

// infrastructureDeleted makes m what an infrastructure provider leaves when
// the machine is deleted (as machine does with gone).
func (e *evidenceEnv) infrastructureDeleted(t *testing.T, m *clusterv1.Machine) {
	t.Helper()
	ctx := context.Background()
	cur := &clusterv1.Machine{}
	must(t, e.host.Get(ctx, client.ObjectKeyFromObject(m), cur))
	cur.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse,
		Reason: clusterv1.MachineInfrastructureDeletedReason, LastTransitionTime: metav1.Now()}}
	must(t, e.host.Status().Update(ctx, cur))
	must(t, e.host.Delete(ctx, cur))
}

// releaseMachine deletes the Machine named name and drops its finalizer:
// it is gone from the host.
func (e *evidenceEnv) releaseMachine(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "capi", Name: name}
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &clusterv1.Machine{}
		if err := e.host.Get(ctx, key, m); err != nil {
			return client.IgnoreNotFound(err)
		}
		m.Finalizers = nil
		return e.host.Update(ctx, m)
	}))
	if err := e.host.Delete(ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "capi", Name: name}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	poll.T(t, 30*time.Second, 50*time.Millisecond, "Machine "+name+" gone", poll.NoError(func() error {
		switch err := e.host.Get(ctx, key, &clusterv1.Machine{}); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("still there")
	}))
}
