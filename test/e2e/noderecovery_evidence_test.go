//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/nodecond"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/poll"
)

// Evidence-first detection (spec.nodeRecovery.detection, docs/safety.md
// rule 22) on the lab: a node whose Machine shows it off and whose kubelet
// Lease fedfailover read unchanged over the silence window is lost at once.
// The lab's kwok Lease lasts 8 s (renewed every 2 s), so the window is 6 s;
// the member marks a node NotReady 16-21 s after its last renewal (node
// monitor grace period 16 s, checked every 5 s).

// evidenceTaintBound is how soon after power-off the taint must come by
// evidence: the silence window (6 s), a pass, the live re-reads and the
// patch, well before the member marks the node NotReady.
const evidenceTaintBound = 15 * time.Second

// firstTaint polls the node every 200 ms until the out-of-service taint is
// on it and returns the Node as read then (with the Ready condition it had
// at the moment the taint was first seen) and when it was read.
func firstTaint(t *testing.T, cl client.Client, node string, timeout time.Duration) (*corev1.Node, time.Time) {
	t.Helper()
	var seen *corev1.Node
	var at time.Time
	poll.T(t, timeout, 200*time.Millisecond, node+" tainted out-of-service", poll.Reason(func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		if !hasOOSTaint(n) {
			return false, "Ready=" + string(lab.NodeReadyStatus(n))
		}
		seen, at = n, time.Now()
		return true, ""
	}))
	return seen, at
}

// readyCondition describes a node's Ready condition for messages.
func readyCondition(n *corev1.Node) string {
	c := nodecond.Ready(n)
	if c == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("Ready=%s since %s", c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339))
}

// waitDetected waits for the node's active record to say how the loss was
// detected and returns it; the record must name method and evidence.
func waitDetected(t *testing.T, cluster, node string, want v1alpha1.NodeLossDetection, mentions string) *v1alpha1.NodeRecovery {
	t.Helper()
	var got *v1alpha1.NodeRecovery
	eventually(t, 10*time.Second, fmt.Sprintf("the record of %s says detection %s", node, want), func(ctx context.Context) (bool, string) {
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		if rec == nil || rec.Status.Detection == "" || rec.Status.Method == "" || rec.Status.Evidence == "" {
			return false, describeRecord(rec)
		}
		if rec.Status.Detection != want || !strings.Contains(rec.Status.DetectedBy, mentions) ||
			rec.Status.Method != v1alpha1.RecoveryMethodOutOfServiceTaint || rec.Status.Evidence != "MachineInfrastructureDeleted" {
			t.Fatalf("record: detection %q detectedBy %q; %s; want detection %s, detectedBy mentioning %q, method %s, evidence MachineInfrastructureDeleted",
				rec.Status.Detection, rec.Status.DetectedBy, describeRecord(rec), want, mentions, v1alpha1.RecoveryMethodOutOfServiceTaint)
		}
		got = rec
		return true, ""
	})
	return got
}

// waitPolicyDetection waits for the policy's status to report the node's
// recovery with the detection.
func waitPolicyDetection(t *testing.T, pol, cluster, node string, want v1alpha1.NodeLossDetection) {
	t.Helper()
	eventually(t, 30*time.Second, fmt.Sprintf("policy status reports %s found lost by %s", node, want), func(ctx context.Context) (bool, string) {
		p, err := getPolicy(ctx, pol)
		if err != nil {
			return false, err.Error()
		}
		r := recoveryOf(p, cluster, node)
		return r != nil && r.Detection == want, fmt.Sprintf("recovery %+v", r)
	})
}

// replacedElsewhere waits for the StatefulSet's replacement pod Running on
// another node with the volume attached only there.
func replacedElsewhere(t *testing.T, cl client.Client, ns, pv, node string) *corev1.Pod {
	t.Helper()
	repl := runningPod(t, cl, ns, "db", 90*time.Second, node)
	eventually(t, 60*time.Second, "volume attached only to the replacement's node", func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, repl.Spec.NodeName)
	})
	return repl
}

// (a) A powered-off node whose Machine infrastructure is deleted, under a
// policy whose notReadyFor (60 s) keeps the Ready condition from making it
// lost within the test: the out-of-service taint comes while the Node still
// reports Ready=True, less than 15 s after the power-off; the record says
// evidence found the loss, by the kubelet Lease; the StatefulSet's
// replacement runs elsewhere with its volume attached there only.
func TestNodeRecoveryEvidenceTaintsWhileReady(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member1", "nr-ev-ready"
	startNodeRecovery(t)
	pol := nrPolicy(t, "nr-ev-ready", func(s *v1alpha1.NodeRecoverySpec) { s.NotReadyFor = "60s" })
	if got := pol.Spec.NodeRecovery.Detection; got != v1alpha1.NodeLossDetectionEvidence {
		t.Fatalf("policy created without detection has detection %q, want the default %s", got, v1alpha1.NodeLossDetectionEvidence)
	}
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)

	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	n, tainted := firstTaint(t, cl, node, 60*time.Second)
	after := tainted.Sub(powerOff)
	t.Logf("tainted %.1fs after power-off, the node %s", after.Seconds(), readyCondition(n))
	if lab.NodeReadyStatus(n) != corev1.ConditionTrue {
		t.Fatalf("the taint was first seen with the node %s: evidence-first detection should taint it while it still reports Ready=True", readyCondition(n))
	}
	if after >= evidenceTaintBound {
		t.Fatalf("tainted %.1fs after power-off, want less than %s", after.Seconds(), evidenceTaintBound)
	}
	waitDetected(t, cluster, node, v1alpha1.NodeLossDetectionEvidence, "kubelet Lease")
	waitPolicyDetection(t, pol.Name, cluster, node, v1alpha1.NodeLossDetectionEvidence)

	repl := replacedElsewhere(t, cl, ns, pv, node)
	t.Logf("replacement Running on %s %.1fs after power-off, %.1fs after the taint", repl.Spec.NodeName,
		time.Since(powerOff).Seconds(), time.Since(tainted).Seconds())
	restoreAndWaitClean(t, cl, cluster, node)
}

// (b) The node's Machine infrastructure is deleted (the same evidence as a
// power-off) while its kwok keeps running and renewing its Lease: for 60 s,
// read every second, the node keeps no taint, no record of an action, the
// same pod and its volume. Then the node is really powered off: the taint
// comes by evidence within 15 s, so fedfailover had the evidence in hand
// all along and only the renewed Lease held it back.
func TestNodeRecoveryEvidenceKubeletAliveIsNotLost(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member2", "nr-ev-alive"
	startNodeRecovery(t)
	nrPolicy(t, "nr-ev-alive", nil)
	cl := theLab.MustClient(cluster)
	node := lab.NodeName(cluster, 3)
	pod, pv := deploymentOnNode(t, cluster, ns, node)
	restoreAfter(t, cluster, node)
	// Runs before restoreAfter's check (cleanups run last-in first-out): a
	// Ready node with its Machine deleted would be left as it is.
	t.Cleanup(func() {
		if err := theLab.Restore(context.Background(), node); err != nil {
			t.Errorf("restore %s: %v", node, err)
		}
	})
	readyBefore := nodecond.Ready(mustNode(t, cl, node))

	if err := theLab.ApplyEvidence(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	evidenceShown := func(ctx context.Context) (bool, string) {
		m, err := theLab.Machine(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		if m.DeletionTimestamp == nil || c == nil || c.Status != metav1.ConditionFalse || c.Reason != clusterv1.MachineInfrastructureDeletedReason {
			return false, fmt.Sprintf("Machine %s: deleting=%v InfrastructureReady=%+v", m.Name, m.DeletionTimestamp != nil, c)
		}
		return true, ""
	}
	eventually(t, 10*time.Second, "Machine "+node+" shows its infrastructure deleted", evidenceShown)
	unchanged := untouched(cl, ns, pod, pv, node)
	holds(t, 60*time.Second, "a node whose kubelet renews its Lease is left alone despite its Machine", func(ctx context.Context) (bool, string) {
		if ok, why := evidenceShown(ctx); !ok {
			return false, "the evidence went away, the hold proves nothing: " + why
		}
		if ok, why := unchanged(ctx); !ok {
			return false, why
		}
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		if c := nodecond.Ready(n); c == nil || c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&readyBefore.LastTransitionTime) {
			return false, "the node did not stay Ready (its kwok runs): " + readyCondition(n)
		}
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		if acted(rec) {
			return false, "an action was recorded: " + describeRecord(rec)
		}
		return true, ""
	})

	// The kubelet stops now: the same evidence makes the node lost.
	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	n, tainted := firstTaint(t, cl, node, 60*time.Second)
	t.Logf("powered off after the hold: tainted %.1fs later, the node %s", tainted.Sub(powerOff).Seconds(), readyCondition(n))
	if lab.NodeReadyStatus(n) != corev1.ConditionTrue || tainted.Sub(powerOff) >= evidenceTaintBound {
		t.Fatalf("tainted %.1fs after power-off with the node %s: want by evidence, while Ready=True, within %s",
			tainted.Sub(powerOff).Seconds(), readyCondition(n), evidenceTaintBound)
	}
	waitDetected(t, cluster, node, v1alpha1.NodeLossDetectionEvidence, "kubelet Lease")
	restoreAndWaitClean(t, cl, cluster, node)
}

// (c) Powered off, tainted by evidence, then powered on again before the
// member marks the node NotReady: fedfailover reads the Lease renewed,
// removes its taint once the released volume is detached from the node, and
// finishes the record with the node returned. The node's Ready condition
// never changed: the member never saw it NotReady.
func TestNodeRecoveryEvidenceNodeBackBeforeNotReady(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member2", "nr-ev-back"
	startNodeRecovery(t)
	nrPolicy(t, "nr-ev-back", func(s *v1alpha1.NodeRecoverySpec) { s.NotReadyFor = "60s" })
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	readyBefore := nodecond.Ready(mustNode(t, cl, node))

	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	n, tainted := firstTaint(t, cl, node, 60*time.Second)
	if lab.NodeReadyStatus(n) != corev1.ConditionTrue || tainted.Sub(powerOff) >= evidenceTaintBound {
		t.Fatalf("tainted %.1fs after power-off with the node %s: want by evidence, while Ready=True, within %s",
			tainted.Sub(powerOff).Seconds(), readyCondition(n), evidenceTaintBound)
	}
	rec := waitDetected(t, cluster, node, v1alpha1.NodeLossDetectionEvidence, "kubelet Lease")
	if err := theLab.Restore(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Logf("tainted %.1fs after power-off; powered on again %.1fs after power-off", tainted.Sub(powerOff).Seconds(), time.Since(powerOff).Seconds())

	eventually(t, 60*time.Second, node+" untainted, its record finished with the node returned", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		active, finished, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		if hasOOSTaint(n) || active != nil {
			return false, fmt.Sprintf("%s taints=%v %s", readyCondition(n), n.Spec.Taints, describeRecord(active))
		}
		i := slices.IndexFunc(finished, func(r v1alpha1.NodeRecovery) bool { return r.Name == rec.Name })
		if i < 0 {
			return false, "record " + rec.Name + " neither active nor finished"
		}
		f := finished[i].Status
		if f.FinishReason != v1alpha1.FinishNodeReturned || f.Detection != v1alpha1.NodeLossDetectionEvidence ||
			!strings.Contains(f.Message, "kubelet Lease renewed") || !strings.Contains(f.Message, "taint added by fedfailover removed") {
			t.Fatalf("record %s finished with reason %q, detection %q, message %q; want %s, %s, the Lease read renewed and the taint removed",
				rec.Name, f.FinishReason, f.Detection, f.Message, v1alpha1.FinishNodeReturned, v1alpha1.NodeLossDetectionEvidence)
		}
		return true, ""
	})
	n = mustNode(t, cl, node)
	if c := nodecond.Ready(n); c == nil || c.Status != corev1.ConditionTrue || !c.LastTransitionTime.Equal(&readyBefore.LastTransitionTime) {
		t.Fatalf("the node is %s, was Ready=True since %s before the power-off: the member marked it NotReady before it was back "+
			"(powered on %.1fs after the power-off), so this run did not try a return before NotReady", readyCondition(n),
			readyBefore.LastTransitionTime.UTC().Format(time.RFC3339), time.Since(powerOff).Seconds())
	}
	holds(t, 5*time.Second, node+" not tainted again", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		return !hasOOSTaint(n), "re-tainted"
	})
	repl := runningPod(t, cl, ns, "db", 90*time.Second, "")
	eventually(t, 60*time.Second, "the volume attached only to the pod's node", func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, repl.Spec.NodeName)
	})
}

// (d) As (a) with detection NotReady: no taint while the node reports
// Ready=True, however long its Machine has shown it off. notReadyFor is
// the harness's 5 s here, so the taint does come, by the Ready condition,
// once the member marked the node NotReady: the opt-out keeps the old path
// working, not merely idle.
func TestNodeRecoveryEvidenceDetectionNotReady(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member1", "nr-ev-notready"
	startNodeRecovery(t)
	pol := nrPolicy(t, "nr-ev-notready", func(s *v1alpha1.NodeRecoverySpec) { s.Detection = v1alpha1.NodeLossDetectionNotReady })
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)

	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	n, tainted := firstTaint(t, cl, node, 90*time.Second)
	t.Logf("tainted %.1fs after power-off, the node %s", tainted.Sub(powerOff).Seconds(), readyCondition(n))
	if lab.NodeReadyStatus(n) == corev1.ConditionTrue {
		t.Fatalf("tainted %.1fs after power-off while the node still reported %s: detection NotReady must wait for the Ready condition",
			tainted.Sub(powerOff).Seconds(), readyCondition(n))
	}
	waitDetected(t, cluster, node, v1alpha1.NodeLossDetectionNotReady, "not Ready")
	waitPolicyDetection(t, pol.Name, cluster, node, v1alpha1.NodeLossDetectionNotReady)
	repl := replacedElsewhere(t, cl, ns, pv, node)
	t.Logf("replacement Running on %s %.1fs after power-off", repl.Spec.NodeName, time.Since(powerOff).Seconds())
	restoreAndWaitClean(t, cl, cluster, node)
}

// (e) As (a) with method ForceDelete (members without the out-of-service
// taint): the node is still Ready=True, with no taint of the node lifecycle
// controller, when its pod is force-deleted, so fedfailover taints it
// failover.fedfailover.io/lost:NoSchedule first. Sampled every 200 ms, the
// pod first, then the Node: once the pod is seen gone, the Node read after
// it must carry the taint. While the replacement comes up, no pod of the
// StatefulSet but the original is ever bound to the dead node (the member's
// scheduler, which would pick the emptied node, keeps away from it); the
// replacement runs elsewhere and is not deleted again. When the node is
// back, the taint goes and the record closes. Before the taint, the
// scheduler bound replacements onto the dead node and fedfailover deleted
// them again every pass until the member marked the node NotReady.
func TestNodeRecoveryEvidenceForceDeleteTaintsNoSchedule(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member2", "nr-ev-force"
	startNodeRecovery(t)
	nrPolicy(t, "nr-ev-force", func(s *v1alpha1.NodeRecoverySpec) {
		s.NotReadyFor, s.Method = "60s", v1alpha1.RecoveryMethodForceDelete
	})
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)

	// boundToDeadNode names a pod of the StatefulSet, other than the
	// original, bound to the dead node ("" when none).
	boundToDeadNode := func(ctx context.Context) (string, error) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "db"}); err != nil {
			return "", err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == node && p.UID != pod.UID {
				return fmt.Sprintf("%s (uid %s)", p.Name, p.UID), nil
			}
		}
		return "", nil
	}
	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	poll.T(t, 60*time.Second, 200*time.Millisecond, "the old pod gone, "+node+" tainted NoSchedule before", poll.Reason(func(ctx context.Context) (bool, string) {
		p, err := getPod(ctx, cl, ns, pod.Name)
		gone := apierrors.IsNotFound(err) || (err == nil && p.UID != pod.UID)
		if err != nil && !gone {
			return false, err.Error()
		}
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		if !gone {
			return false, fmt.Sprintf("pod %s still there; %s taints=%v", pod.Name, readyCondition(n), n.Spec.Taints)
		}
		if !hasLostTaint(n) {
			t.Fatalf("pod %s gone %.1fs after power-off, and %s read after that had no %s NoSchedule taint (%s, taints %v)",
				pod.Name, time.Since(powerOff).Seconds(), node, contract.TaintLost, readyCondition(n), n.Spec.Taints)
		}
		t.Logf("pod gone %.1fs after power-off, the node %s, taints %v", time.Since(powerOff).Seconds(), readyCondition(n), n.Spec.Taints)
		if lab.NodeReadyStatus(n) != corev1.ConditionTrue {
			t.Fatalf("the node was %s when its pod was gone: this run did not force-delete while it still reported Ready=True", readyCondition(n))
		}
		return true, ""
	}))
	rec := waitMarked(t, cl, cluster, node, v1alpha1.RecoveryMethodForceDelete, "MachineInfrastructureDeleted")
	if rec.Status.Detection != v1alpha1.NodeLossDetectionEvidence || rec.Status.LostTaint != v1alpha1.LostTaintOwned {
		t.Fatalf("%s detection %q lostTaint %q: want Evidence, Owned", describeRecord(rec), rec.Status.Detection, rec.Status.LostTaint)
	}

	// ForceDelete waits for the attach-detach controller's periodic sync
	// (about a minute) before the volume attaches elsewhere.
	var repl *corev1.Pod
	eventually(t, 150*time.Second, "the replacement Running off "+node+", none bound to it", func(ctx context.Context) (bool, string) {
		if bound, err := boundToDeadNode(ctx); err != nil {
			return false, err.Error()
		} else if bound != "" {
			t.Fatalf("replacement %s was bound to the dead node %s", bound, node)
		}
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "db"}); err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; lab.PodReady(p) && p.Spec.NodeName != node {
				repl = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods, none Ready elsewhere", len(pods.Items))
	})
	eventually(t, 60*time.Second, "volume attached only to the replacement's node", func(ctx context.Context) (bool, string) {
		return volumeOnlyOn(ctx, cl, pv, repl.Spec.NodeName)
	})
	t.Logf("replacement Running on %s %.1fs after power-off", repl.Spec.NodeName, time.Since(powerOff).Seconds())
	holds(t, 10*time.Second, "the replacement stays, nothing bound to "+node, func(ctx context.Context) (bool, string) {
		p, err := getPod(ctx, cl, ns, repl.Name)
		if err != nil || p.UID != repl.UID || p.DeletionTimestamp != nil {
			return false, fmt.Sprintf("replacement %s deleted or replaced: %v", repl.Name, err)
		}
		bound, err := boundToDeadNode(ctx)
		if err != nil {
			return false, err.Error()
		}
		return bound == "", "bound to the dead node: " + bound
	})
	restoreAndWaitClean(t, cl, cluster, node)
}

// mustNode reads a member Node or fails the test.
func mustNode(t *testing.T, cl client.Client, node string) *corev1.Node {
	t.Helper()
	n, err := getNode(t.Context(), cl, node)
	if err != nil {
		t.Fatal(err)
	}
	if nodecond.Ready(n) == nil {
		t.Fatalf("node %s has no Ready condition", node)
	}
	return n
}
