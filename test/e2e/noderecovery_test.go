//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/test/lab"
)

// The node recovery tests run fedfailover's controllers in this process
// against the lab. Nodes go NotReady ~16-18 s after a fault (lab lease and
// grace period), and the policies use notReadyFor 5 s. With the default
// detection (Evidence), a powered-off node whose Machine shows it off is
// lost sooner, ~6 s after the power-off (the silence window of the lab's
// 8 s Lease), while it still reports Ready=True
// (noderecovery_evidence_test.go).

// stsOnLostNode creates a one-replica StatefulSet with an RWO volume in the
// member, waits for it to run, and returns its pod, node and volume.
func stsOnLostNode(t *testing.T, cluster, ns string) (pod *corev1.Pod, pv string) {
	t.Helper()
	ctx := t.Context()
	cl := theLab.MustClient(cluster)
	if _, err := theLab.CreateStatefulSetWithVolumes(ctx, cluster, ns, "db", 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pod = runningPod(t, cl, ns, "db", 90*time.Second, "")
	pv, err := pvcVolume(ctx, cl, ns, lab.VolumeTemplateName+"-db-0")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "volume attached to "+pod.Spec.NodeName, func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, pod.Spec.NodeName)
	})
	return pod, pv
}

// deploymentOnNode creates a one-replica Deployment "app" with an RWO volume
// in the member, pinned to node, waits for it to run with its volume
// attached there, and returns its pod and volume.
func deploymentOnNode(t *testing.T, cluster, ns, node string) (*corev1.Pod, string) {
	t.Helper()
	ctx := t.Context()
	cl := theLab.MustClient(cluster)
	if _, err := theLab.CreateDeploymentWithVolume(ctx, cluster, ns, "app"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pinDeployment(t, cl, ns, "app", node)
	pod := runningPod(t, cl, ns, "app", 90*time.Second, "")
	if pod.Spec.NodeName != node {
		t.Fatalf("pod on %s, want %s", pod.Spec.NodeName, node)
	}
	pv, err := pvcVolume(ctx, cl, ns, "app")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "volume attached", func(ctx context.Context) (bool, string) { return volumeOnlyOn(ctx, cl, pv, node) })
	return pod, pv
}

// untouched checks that a node fedfailover must leave alone (partitioned,
// no proof it is off) is as it was: no out-of-service taint, the same pod
// not being deleted, its volume attached to that node only.
func untouched(cl client.Client, ns string, pod *corev1.Pod, pv, node string) func(ctx context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		if hasOOSTaint(n) {
			return false, "partitioned node tainted out-of-service"
		}
		p, err := getPod(ctx, cl, ns, pod.Name)
		if err != nil || p.UID != pod.UID || p.DeletionTimestamp != nil {
			return false, fmt.Sprintf("pod %s deleted or replaced: %v", pod.Name, err)
		}
		return volumeOnlyOn(ctx, cl, pv, node)
	}
}

// Case 1: StatefulSet with an RWO PV on a powered-off node whose Machine
// infrastructure is deleted: fedfailover taints the node, the replacement
// runs elsewhere with the volume attached only there, and the taint goes
// when the node comes back.
func TestNodeRecoveryStatefulSetMachineDeleted(t *testing.T) {
	ctx := t.Context()
	testStart := time.Now()
	const cluster, ns = "member1", "nr-sts"
	startNodeRecovery(t)
	pol := nrPolicy(t, "nr-sts", nil)
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)

	succeeded := metrics.NodeRecoveries.WithLabelValues(cluster, string(v1alpha1.RecoveryMethodOutOfServiceTaint), metrics.NodeRecoveryResultSucceeded)
	before := testutil.ToFloat64(succeeded)
	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	var tainted time.Time
	eventually(t, 60*time.Second, node+" tainted out-of-service by fedfailover", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		if !hasOOSTaint(n) {
			return false, "Ready=" + string(lab.NodeReadyStatus(n))
		}
		tainted = time.Now()
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		if rec == nil || rec.Status.Evidence != "MachineInfrastructureDeleted" || rec.Status.Method != v1alpha1.RecoveryMethodOutOfServiceTaint ||
			rec.Status.TaintPreexisting || rec.Status.IntentAt == nil || rec.Spec.NodeUID != string(n.UID) {
			t.Fatalf("taint without the expected record: %s", describeRecord(rec))
		}
		if len(n.Annotations) > 0 && slices.ContainsFunc(contract.NodeMarkKeys(), func(k string) bool { _, ok := n.Annotations[k]; return ok }) {
			t.Fatalf("fedfailover annotations on the member Node: %v", n.Annotations)
		}
		return true, ""
	})
	t.Logf("tainted %.1fs after power-off", tainted.Sub(powerOff).Seconds())
	repl := runningPod(t, cl, ns, "db", 90*time.Second, node)
	eventually(t, 60*time.Second, "volume attached only to the replacement's node", func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, repl.Spec.NodeName)
	})
	t.Logf("replacement Running on %s %.1fs after power-off, %.1fs after the taint", repl.Spec.NodeName,
		time.Since(powerOff).Seconds(), time.Since(tainted).Seconds())
	eventually(t, 30*time.Second, "policy status reports the node Recovered", func(ctx context.Context) (bool, string) {
		p, err := getPolicy(ctx, pol.Name)
		if err != nil {
			return false, err.Error()
		}
		r := recoveryOf(p, cluster, node)
		if r == nil || r.Phase != v1alpha1.RecoveryPhaseRecovered || r.Method != v1alpha1.RecoveryMethodOutOfServiceTaint || r.FencedAt == nil {
			return false, fmt.Sprintf("recovery %+v", r)
		}
		return slices.ContainsFunc(p.Status.RecentDecisions, func(d v1alpha1.Decision) bool {
			return d.Reason == noderecovery.ReasonOutOfServiceTainted && d.Object == "Node/"+node
		}), fmt.Sprintf("decisions %+v", p.Status.RecentDecisions)
	})
	if got := testutil.ToFloat64(succeeded) - before; got != 1 {
		t.Errorf("fedfailover_node_recoveries_total{result=succeeded} grew by %v, want 1", got)
	}
	eventually(t, 10*time.Second, "events on the node", func(ctx context.Context) (bool, string) {
		evs, err := nodeEvents(ctx, cl, node, testStart)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(evs, noderecovery.ReasonOutOfServiceTainted) && slices.Contains(evs, noderecovery.ReasonRecovered), fmt.Sprint(evs)
	})

	// The node comes back: the taint fedfailover added goes, and stays gone.
	if err := theLab.Restore(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, node+" Ready without the taint or marks", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		if lab.NodeReadyStatus(n) != corev1.ConditionTrue || hasOOSTaint(n) {
			return false, fmt.Sprintf("Ready=%s taints=%v", lab.NodeReadyStatus(n), n.Spec.Taints)
		}
		rec, finished, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return rec == nil && slices.ContainsFunc(finished, func(r v1alpha1.NodeRecovery) bool {
			return r.Status.FinishReason == v1alpha1.FinishNodeReturned && r.Status.RecoveredAt != nil
		}), describeRecord(rec)
	})
	holds(t, 5*time.Second, node+" not tainted again", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		return !hasOOSTaint(n), "re-tainted"
	})
}

// Case 2: a partitioned node (no evidence) is never tainted; nothing of its
// pod or volume is deleted; the policy and an event say why; after healing
// everything is as before.
func TestNodeRecoveryPartitionNoEvidence(t *testing.T) {
	ctx := t.Context()
	testStart := time.Now()
	const cluster, ns = "member2", "nr-partition"
	startNodeRecovery(t)
	pol := nrPolicy(t, "nr-partition", nil)
	cl := theLab.MustClient(cluster)
	node := lab.NodeName(cluster, 2)
	pod, pv := deploymentOnNode(t, cluster, ns, node)
	vas := &storagev1.VolumeAttachmentList{}
	if err := cl.List(ctx, vas); err != nil {
		t.Fatal(err)
	}
	restoreAfter(t, cluster, node)

	if err := theLab.Partition(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theLab.Heal(node) })
	unchanged := untouched(cl, ns, pod, pv, node)
	eventually(t, 60*time.Second, "FencingBlocked explains the partitioned node", func(ctx context.Context) (bool, string) {
		if ok, why := unchanged(ctx); !ok {
			t.Fatal(why)
		}
		c, err := policyCondition(ctx, pol.Name, v1alpha1.ConditionFencingBlocked)
		if err != nil || c == nil {
			return false, fmt.Sprintf("condition %v err %v", c, err)
		}
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == pol.Generation &&
			containsAll(c.Message, node, "is not being deleted"), c.Message
	})
	evs, err := nodeEvents(ctx, cl, node, testStart)
	if err != nil || slices.Index(evs, noderecovery.ReasonFencingBlocked) < 0 {
		t.Fatalf("no FencingBlocked event on %s: %v %v", node, evs, err)
	}
	// Hold well past the point where a taint would have come (but heal
	// before the 30 s unreachable toleration evicts the pod).
	holds(t, 8*time.Second, "partitioned node left alone", unchanged)
	if n := countOf(evs, noderecovery.ReasonFencingBlocked); n != 1 {
		t.Fatalf("%d FencingBlocked events, want 1 (events on transitions only)", n)
	}

	if err := theLab.Heal(node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "healed: node Ready, same pod Running, FencingBlocked False", func(ctx context.Context) (bool, string) {
		if ok, why := unchanged(ctx); !ok {
			return false, why
		}
		n, _ := getNode(ctx, cl, node)
		if lab.NodeReadyStatus(n) != corev1.ConditionTrue {
			return false, "not Ready yet"
		}
		p, _ := getPod(ctx, cl, ns, pod.Name)
		if !lab.PodReady(p) {
			return false, "pod not Ready"
		}
		c, err := policyCondition(ctx, pol.Name, v1alpha1.ConditionFencingBlocked)
		if err != nil || c == nil {
			return false, fmt.Sprint(err)
		}
		return c.Status == metav1.ConditionFalse, c.Message
	})
	// The member status writer and ours share the status without clobbering.
	p, err := getPolicy(ctx, pol.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{v1alpha1.ConditionMembersConnected, v1alpha1.ConditionStormActive, v1alpha1.ConditionFencingBlocked} {
		if meta.FindStatusCondition(p.Status.Conditions, c) == nil {
			t.Errorf("condition %s missing from status: %+v", c, p.Status.Conditions)
		}
	}
	if len(p.Status.Members) == 0 {
		t.Errorf("status.members missing: %+v", p.Status)
	}
	after, _ := nodeEvents(ctx, cl, node, testStart)
	if slices.ContainsFunc(after, func(r string) bool { return r != noderecovery.ReasonFencingBlocked }) {
		t.Fatalf("unexpected node recovery events on a partitioned node: %v", after)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// waitMarked waits for fedfailover's recorded action on the node (and, for
// the taint method, the taint) and returns the record.
func waitMarked(t *testing.T, cl client.Client, cluster, node string, method v1alpha1.RecoveryMethod, evidence string) *v1alpha1.NodeRecovery {
	t.Helper()
	var got *v1alpha1.NodeRecovery
	eventually(t, 60*time.Second, fmt.Sprintf("%s recorded %s by fedfailover", node, method), func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		if rec == nil || rec.Status.ActedAt == nil {
			return false, "Ready=" + string(lab.NodeReadyStatus(n)) + "; " + describeRecord(rec)
		}
		if rec.Status.Method != method || rec.Status.Evidence != evidence {
			t.Fatalf("unexpected record: %s", describeRecord(rec))
		}
		if hasOOSTaint(n) != (method == v1alpha1.RecoveryMethodOutOfServiceTaint) {
			t.Fatalf("taints %v for method %s", n.Spec.Taints, method)
		}
		got = rec
		return true, ""
	})
	return got
}

// waitRecovered waits for the replacement of the app's pod on another node
// with its volume attached only there, and for the policy and the node's
// record to say Recovered.
func waitRecovered(t *testing.T, cl client.Client, pol, cluster, ns, app, pv, node string, timeout time.Duration) {
	t.Helper()
	repl := runningPod(t, cl, ns, app, timeout, node)
	eventually(t, timeout, "volume attached only to the replacement's node", func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, repl.Spec.NodeName)
	})
	eventually(t, 30*time.Second, "policy status and record report the node Recovered", func(ctx context.Context) (bool, string) {
		p, err := getPolicy(ctx, pol)
		if err != nil {
			return false, err.Error()
		}
		r := recoveryOf(p, cluster, node)
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return r != nil && r.Phase == v1alpha1.RecoveryPhaseRecovered && rec != nil && rec.Status.RecoveredAt != nil,
			fmt.Sprintf("recovery %+v; %s", r, describeRecord(rec))
	})
}

// restoreAndWaitClean powers the node back on and waits until fedfailover
// removed its taint and closed the record.
func restoreAndWaitClean(t *testing.T, cl client.Client, cluster, node string) {
	t.Helper()
	restoreAndWaitClosed(t, cl, cluster, node, false)
}

// restoreAndWaitClosed powers the node back on and waits until it is Ready
// with its record closed, and with (taintStays) or without an
// out-of-service taint.
func restoreAndWaitClosed(t *testing.T, cl client.Client, cluster, node string, taintStays bool) {
	t.Helper()
	if err := theLab.Restore(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, fmt.Sprintf("%s Ready, its record closed, out-of-service taint %v, no NoSchedule taint of fedfailover's", node, taintStays), func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return lab.NodeReadyStatus(n) == corev1.ConditionTrue && hasOOSTaint(n) == taintStays && !hasLostTaint(n) && rec == nil,
			fmt.Sprintf("Ready=%s taints=%v %s", lab.NodeReadyStatus(n), n.Spec.Taints, describeRecord(rec))
	})
}

// Case 3: the ForceDelete method (for members older than 1.28) recovers too:
// pods force-deleted, then the node's VolumeAttachments.
func TestNodeRecoveryForceDelete(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member2", "nr-force"
	startNodeRecovery(t)
	pol := nrPolicy(t, "nr-force", func(s *v1alpha1.NodeRecoverySpec) { s.Method = v1alpha1.RecoveryMethodForceDelete })
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	start := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	waitMarked(t, cl, cluster, node, v1alpha1.RecoveryMethodForceDelete, "MachineInfrastructureDeleted")
	// The attach-detach controller notices the deleted attachment on its
	// periodic sync (1 min by default).
	waitRecovered(t, cl, pol.Name, cluster, ns, "db", pv, node, 150*time.Second)
	t.Logf("ForceDelete recovery %.1fs after power-off", time.Since(start).Seconds())
	restoreAndWaitClean(t, cl, cluster, node)
}

// Case 4: a storm (2 of 3 nodes lost, maxUnhealthy 40% allows 1) suspends
// recovery even with fencing evidence; after the nodes return and the
// cooldown passes, StormActive clears.
func TestNodeRecoveryStorm(t *testing.T) {
	ctx := t.Context()
	const cluster = "member1"
	startNodeRecovery(t)
	// A longer notReadyFor than the spread of the nodes' NotReady times, so
	// both count as lost before either could be acted on. Found lost by
	// evidence, they are held the same way: a node whose Machine shows it
	// off counts for the storm guard's hold as soon as its Lease is read.
	pol := nrPolicy(t, "nr-storm", func(s *v1alpha1.NodeRecoverySpec) { s.NotReadyFor = "10s" })
	cl := theLab.MustClient(cluster)
	nodes := []string{lab.NodeName(cluster, 2), lab.NodeName(cluster, 3)}
	for _, n := range nodes {
		restoreAfter(t, cluster, n)
	}
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() { errs <- theLab.PowerOff(ctx, n, lab.EvidenceMachineDeleted) }()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	noTaint := func(ctx context.Context) (bool, string) {
		for _, name := range nodes {
			n, err := getNode(ctx, cl, name)
			if err != nil {
				return false, err.Error()
			}
			rec, _, err := nodeRecords(ctx, cluster, name)
			if err != nil {
				return false, err.Error()
			}
			if hasOOSTaint(n) || acted(rec) {
				return false, name + " acted on during a storm"
			}
		}
		return true, ""
	}
	eventually(t, 60*time.Second, "StormActive", func(ctx context.Context) (bool, string) {
		if ok, why := noTaint(ctx); !ok {
			t.Fatal(why)
		}
		c, err := policyCondition(ctx, pol.Name, v1alpha1.ConditionStormActive)
		if err != nil || c == nil {
			return false, fmt.Sprint(err)
		}
		return c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "2 of 3"), c.Message
	})
	holds(t, 5*time.Second, "no action during the storm", noTaint)
	p, err := getPolicy(ctx, pol.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if r := recoveryOf(p, cluster, n); r == nil || r.Phase != v1alpha1.RecoveryPhaseSuspended {
			t.Fatalf("recovery of %s: %+v, want Suspended", n, r)
		}
	}
	for _, n := range nodes {
		if err := theLab.Restore(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 90*time.Second, "storm over after the cooldown", func(ctx context.Context) (bool, string) {
		if ok, why := noTaint(ctx); !ok {
			t.Fatal(why)
		}
		c, err := policyCondition(ctx, pol.Name, v1alpha1.ConditionStormActive)
		if err != nil || c == nil {
			return false, fmt.Sprint(err)
		}
		return c.Status == metav1.ConditionFalse, c.Message
	})
}

// Case 5: a Deployment with a PVC on a node whose Machine reports a
// powered-off condition.
func TestNodeRecoveryPoweredOffCondition(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member1", "nr-poweroff"
	startNodeRecovery(t)
	pol := nrPolicy(t, "nr-poweroff", func(s *v1alpha1.NodeRecoverySpec) {
		s.Fencing = v1alpha1.FencingSpec{PoweredOffConditions: []v1alpha1.MachineConditionMatch{{
			Type: theLab.Options().PowerOffConditionType, Status: metav1.ConditionFalse, Reasons: []string{theLab.Options().PowerOffConditionReason}}}}
	})
	cl := theLab.MustClient(cluster)
	if _, err := theLab.CreateDeploymentWithVolume(ctx, cluster, ns, "app"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cl.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	pod := runningPod(t, cl, ns, "app", 90*time.Second, "")
	node := pod.Spec.NodeName
	pv, err := pvcVolume(ctx, cl, ns, "app")
	if err != nil {
		t.Fatal(err)
	}
	restoreAfter(t, cluster, node)
	if err := theLab.PowerOff(ctx, node, lab.EvidencePoweredOffCondition); err != nil {
		t.Fatal(err)
	}
	waitMarked(t, cl, cluster, node, v1alpha1.RecoveryMethodOutOfServiceTaint, "MachinePoweredOff")
	waitRecovered(t, cl, pol.Name, cluster, ns, "app", pv, node, 90*time.Second)
	restoreAndWaitClean(t, cl, cluster, node)
}

// Case 6: the manager stops right after tainting; Kubernetes recovers the
// pods meanwhile; a new manager resumes from the marks: it reports the
// recovery, repeats no action and removes the taint when the node returns.
func TestNodeRecoveryManagerRestart(t *testing.T) {
	ctx := t.Context()
	testStart := time.Now()
	const cluster, ns = "member2", "nr-restart"
	first := startNodeRecovery(t)
	pol := nrPolicy(t, "nr-restart", nil)
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	marked := waitMarked(t, cl, cluster, node, v1alpha1.RecoveryMethodOutOfServiceTaint, "MachineInfrastructureDeleted")
	// The event follows the taint patch; stopping in between would lose it
	// (events are best effort) and this test counts it.
	eventually(t, 10*time.Second, "taint event written", func(ctx context.Context) (bool, string) {
		evs, err := nodeEvents(ctx, cl, node, testStart)
		if err != nil {
			return false, err.Error()
		}
		return countOf(evs, noderecovery.ReasonOutOfServiceTainted) == 1, fmt.Sprintf("events %v", evs)
	})
	first.stop()
	actedAt := marked.Status.ActedAt.Time
	repl := runningPod(t, cl, ns, "db", 90*time.Second, node)
	eventually(t, 60*time.Second, "volume moved while the manager is down", func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, repl.Spec.NodeName)
	})

	startNodeRecovery(t)
	waitRecovered(t, cl, pol.Name, cluster, ns, "db", pv, node, 60*time.Second)
	rec, _, err := nodeRecords(ctx, cluster, node)
	if err != nil {
		t.Fatal(err)
	}
	if rec == nil || rec.Name != marked.Name || !rec.Status.ActedAt.Time.Equal(actedAt) {
		t.Fatalf("%s, acted at %s before the restart: the action was repeated", describeRecord(rec), actedAt)
	}
	evs, err := nodeEvents(ctx, cl, node, testStart)
	if err != nil {
		t.Fatal(err)
	}
	if countOf(evs, noderecovery.ReasonOutOfServiceTainted) != 1 || countOf(evs, noderecovery.ReasonRecovered) != 1 {
		t.Fatalf("events %v: want one taint and one recovered event", evs)
	}
	restoreAndWaitClean(t, cl, cluster, node)
}

// Case 7: dryRun decides and reports, and changes nothing.
func TestNodeRecoveryDryRun(t *testing.T) {
	ctx := t.Context()
	testStart := time.Now()
	const cluster = "member1"
	startNodeRecovery(t)
	pol := nrPolicy(t, "nr-dryrun", nil)
	host := nrHost(t)
	patch := client.MergeFrom(pol.DeepCopy())
	pol.Spec.DryRun = true
	if err := host.Patch(ctx, pol, patch); err != nil {
		t.Fatal(err)
	}
	cl := theLab.MustClient(cluster)
	node := lab.NodeName(cluster, 1)
	restoreAfter(t, cluster, node)
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	untouched := func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		if hasOOSTaint(n) || acted(rec) {
			return false, "dry run changed the node or recorded an action: " + describeRecord(rec)
		}
		return true, ""
	}
	eventually(t, 60*time.Second, "dry-run decision reported", func(ctx context.Context) (bool, string) {
		if ok, why := untouched(ctx); !ok {
			t.Fatal(why)
		}
		p, err := getPolicy(ctx, pol.Name)
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(p.Status.RecentDecisions, func(d v1alpha1.Decision) bool {
			return d.DryRun && d.Reason == noderecovery.ReasonWouldRecover && d.Object == "Node/"+node
		}), fmt.Sprintf("decisions %+v", p.Status.RecentDecisions)
	})
	// Scenario 13: a dry run writes nothing to the member, not even an
	// event; on the host only the record, marked dry run, and the status.
	evs, err := nodeEvents(ctx, cl, node, testStart)
	if err != nil || len(evs) != 0 {
		t.Fatalf("events %v (err %v) on the member: a dry run writes none", evs, err)
	}
	rec, _, err := nodeRecords(ctx, cluster, node)
	if err != nil || rec == nil || !rec.Status.DryRun || rec.Status.IntentAt != nil {
		t.Fatalf("%s (err %v): want an active dry-run record with no intent", describeRecord(rec), err)
	}
	holds(t, 3*time.Second, "dry run changes nothing", untouched)
}

// Case 8: the Node object is deleted while its Machine reports the
// infrastructure gone: nothing to taint, so its pods and attachments are
// force-deleted (faster than pod GC's 40 s quarantine for orphaned pods).
func TestNodeRecoveryNodeDeleted(t *testing.T) {
	ctx := t.Context()
	testStart := time.Now()
	const cluster, ns = "member2", "nr-deleted"
	startNodeRecovery(t)
	// A notReadyFor longer than the test: only the deleted-Node path may act
	// (the Node is deleted well within the silence window evidence-first
	// detection needs).
	nrPolicy(t, "nr-deleted", func(s *v1alpha1.NodeRecoverySpec) { s.NotReadyFor = "10m" })
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	t.Cleanup(func() {
		ctx := context.Background()
		if err := theLab.Replace(ctx, node); err != nil {
			t.Errorf("replace %s: %v", node, err)
		}
		if err := theLab.WaitNodeReady(ctx, cl, node, corev1.ConditionTrue, 60*time.Second); err != nil {
			t.Errorf("replace %s: %v", node, err)
		}
	})
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	if err := cl.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	recovered := func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "db"}); err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; lab.PodReady(p) && p.Spec.NodeName != node {
				return volumeOnlyOn(ctx, cl, pv, p.Spec.NodeName)
			}
		}
		return false, fmt.Sprintf("%d pods, no replacement Ready", len(pods.Items))
	}
	eventually(t, 90*time.Second, "replacement Running with the volume attached only there", recovered)
	t.Logf("recovered %.1fs after the Node was deleted", time.Since(deleted).Seconds())
	evs, err := nodeEvents(ctx, cl, node, testStart)
	if err != nil || !slices.Contains(evs, noderecovery.ReasonForceDeleteStarted) {
		t.Fatalf("events %v (err %v): want %s from fedfailover", evs, err, noderecovery.ReasonForceDeleteStarted)
	}
}

// Case 9: with requestMachineDeletion, a lost node without evidence gets its
// Machine deleted by fedfailover; once the infrastructure provider (played
// by the test: no Cluster API controllers run in the lab) reports the
// infrastructure gone, the node is fenced and recovered. The operator runs
// as an installation that enables Machine deletion.
func TestNodeRecoveryRequestsMachineDeletion(t *testing.T) {
	ctx := t.Context()
	testStart := time.Now()
	const cluster, ns = "member1", "nr-mdel"
	startNodeRecovery(t, withMachineDeletion)
	pol := nrPolicy(t, "nr-mdel", func(s *v1alpha1.NodeRecoverySpec) { s.Fencing.RequestMachineDeletion = true })
	cl := theLab.MustClient(cluster)
	host := theLab.MustClient(lab.HostName)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	if err := theLab.PowerOff(ctx, node, lab.EvidenceNone); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "Machine deleted by fedfailover, provider reports infrastructure gone", func(ctx context.Context) (bool, string) {
		m, err := theLab.Machine(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		if m.DeletionTimestamp == nil {
			return false, "Machine not being deleted"
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition); c != nil &&
			c.Status == metav1.ConditionFalse && c.Reason == clusterv1.MachineInfrastructureDeletedReason {
			return true, ""
		}
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: clusterv1.MachineInfrastructureReadyCondition,
			Status: metav1.ConditionFalse, Reason: clusterv1.MachineInfrastructureDeletedReason, Message: "KwokMachine deleted",
			ObservedGeneration: m.Generation})
		if err := host.Status().Update(ctx, m); err != nil {
			return false, err.Error()
		}
		return false, "infrastructure condition written"
	})
	waitMarked(t, cl, cluster, node, v1alpha1.RecoveryMethodOutOfServiceTaint, "MachineInfrastructureDeleted")
	waitRecovered(t, cl, pol.Name, cluster, ns, "db", pv, node, 90*time.Second)
	evs, err := nodeEvents(ctx, cl, node, testStart)
	if err != nil || countOf(evs, noderecovery.ReasonMachineDeletionAsked) != 1 {
		t.Fatalf("events %v (err %v): want one %s", evs, err, noderecovery.ReasonMachineDeletionAsked)
	}
	restoreAndWaitClean(t, cl, cluster, node)
}
