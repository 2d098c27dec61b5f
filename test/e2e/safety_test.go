//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/test/lab"
)

// The node recovery invariant, tried as an adversary would (docs/safety.md).

// Scenario 1: every annotation fedfailover ever wrote, copied onto a node
// that is only partitioned (its kubelet alive, its Machine fine): nothing is
// deleted and nothing tainted; the recovery is Blocked and says why. On the
// old code the forged action mark got the pod force-deleted and its
// attachment deleted within a second.
func TestSafetyForgedMarksOnPartitionedNode(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member2", "safety-forged"
	startNodeRecovery(t)
	nrPolicy(t, "safety-forged", nil)
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	if err := theLab.Partition(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theLab.Heal(node) })
	// Forge once the node is lost, as if fedfailover had acted on it (on a
	// Ready node the annotations are merely removed).
	if err := theLab.WaitNodeReady(ctx, cl, node, corev1.ConditionUnknown, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	n, err := getNode(ctx, cl, node)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	maps.Copy(n.Annotations, contract.NodeMarks{LostSince: time.Now().Add(-time.Minute), FencedBy: "MachineInfrastructureDeleted",
		FencedAt: time.Now().Add(-30 * time.Second), Action: v1alpha1.RecoveryMethodForceDelete, TaintedByUs: true,
		Claims: []string{ns + "/" + lab.VolumeTemplateName + "-db-0"}}.Annotations())
	if err := cl.Patch(ctx, n, patch); err != nil {
		t.Fatal(err)
	}
	unchanged := untouched(cl, ns, pod, pv, node)
	eventually(t, 60*time.Second, "the forged recovery is Blocked, the annotations gone", func(ctx context.Context) (bool, string) {
		if ok, why := unchanged(ctx); !ok {
			t.Fatal(why)
		}
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return rec != nil && rec.Status.Phase == v1alpha1.RecoveryPhaseBlocked && strings.Contains(rec.Status.Message, "no fencing evidence now") &&
			rec.Status.Migrated && !contract.HasNodeMarks(n.Annotations), describeRecord(rec)
	})
	// Well past the point where the old code had deleted everything (the
	// 30 s unreachable toleration evicts the pod later on its own).
	holds(t, 5*time.Second, "partitioned node with forged marks left alone", unchanged)
}

// Scenario 6: an out-of-service taint that an admin (or self-node
// remediation, fence agents) put on the node before fedfailover acted is
// never removed by fedfailover, even though fedfailover then recovers the
// node's pods and the node comes back.
func TestSafetyAdminTaintIsNotRemoved(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member1", "safety-admin-taint"
	startNodeRecovery(t)
	// Long enough for the admin to taint first (found lost by evidence, the
	// node waits for the silence window, ~6 s, instead: the admin taints
	// right after the power-off, still first).
	nrPolicy(t, "safety-admin-taint", func(s *v1alpha1.NodeRecoverySpec) { s.NotReadyFor = "15s" })
	cl := theLab.MustClient(cluster)
	pod, _ := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	t.Cleanup(func() { untaint(t, cl, node) })
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	n, err := getNode(ctx, cl, node)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Taints = append(n.Spec.Taints, noderecovery.OutOfServiceTaint) // what the docs tell admins to apply
	if err := cl.Patch(ctx, n, patch); err != nil {
		t.Fatal(err)
	}
	var rec *v1alpha1.NodeRecovery
	eventually(t, 90*time.Second, "fedfailover recovers, recording the taint as not its own", func(ctx context.Context) (bool, string) {
		var err error
		if rec, _, err = nodeRecords(ctx, cluster, node); err != nil {
			return false, err.Error()
		}
		return rec != nil && rec.Status.ActedAt != nil, describeRecord(rec)
	})
	if !rec.Status.TaintPreexisting {
		t.Fatalf("%s: want taintPreexisting", describeRecord(rec))
	}
	runningPod(t, cl, ns, "db", 90*time.Second, node)
	restoreAndWaitClosed(t, cl, cluster, node, true)
	holds(t, 5*time.Second, "the admin's taint stays", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		return hasOOSTaint(n), fmt.Sprintf("taints %v", n.Spec.Taints)
	})
}

// untaint removes the out-of-service taint a test put on purpose.
func untaint(t *testing.T, cl client.Client, node string) {
	ctx := context.Background()
	n, err := getNode(ctx, cl, node)
	if err != nil {
		t.Errorf("untaint %s: %v", node, err)
		return
	}
	patch := client.MergeFrom(n.DeepCopy())
	var keep []corev1.Taint
	for _, tn := range n.Spec.Taints {
		if tn.Key != corev1.TaintNodeOutOfService {
			keep = append(keep, tn)
		}
	}
	n.Spec.Taints = keep
	if err := cl.Patch(ctx, n, patch); err != nil {
		t.Errorf("untaint %s: %v", node, err)
	}
}

// Scenario 7: the policy is deleted while its taint is on a node that is
// still down, with background (kubectl's default) or foreground cascading
// (the default prune of common GitOps tools, which has the garbage
// collector delete the policy's dependents before any finalizer of ours
// runs). The policy goes, the record stays (it has no owner reference
// while active, so no garbage collection takes the proof that the taint is
// fedfailover's), and once the node is back fedfailover still removes its
// taint. Before, foreground deletion collected the record and the taint
// stayed forever.
func TestSafetyPolicyDeletedWhileTainted(t *testing.T) {
	for _, c := range []struct {
		name        string
		propagation metav1.DeletionPropagation
		managerDown bool
	}{
		{"background", metav1.DeletePropagationBackground, false},
		{"foreground", metav1.DeletePropagationForeground, false},
		// A GitOps prune during an upgrade: nothing of fedfailover runs while
		// the garbage collector deletes the policy's dependents.
		{"foreground-while-the-manager-is-down", metav1.DeletePropagationForeground, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			policyDeletedWhileTainted(t, "safety-gone-"+strings.ReplaceAll(c.name, "-while-the-manager-is-down", "-down"), c.propagation, c.managerDown)
		})
	}
}

func policyDeletedWhileTainted(t *testing.T, name string, propagation metav1.DeletionPropagation, managerDown bool) {
	ctx := t.Context()
	const cluster = "member1"
	op := startNodeRecovery(t)
	pol := nrPolicy(t, name, nil)
	cl := theLab.MustClient(cluster)
	pod, _ := stsOnLostNode(t, cluster, name)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	marked := waitMarked(t, cl, cluster, node, v1alpha1.RecoveryMethodOutOfServiceTaint, "MachineInfrastructureDeleted")
	if managerDown {
		op.stop()
	}
	if err := nrHostCl.Delete(ctx, pol, client.PropagationPolicy(propagation)); err != nil {
		t.Fatal(err)
	}
	if managerDown {
		holds(t, 10*time.Second, "the record kept while the manager is down", func(ctx context.Context) (bool, string) {
			rec := &v1alpha1.NodeRecovery{}
			err := nrHostCl.Get(ctx, client.ObjectKeyFromObject(marked), rec)
			if err != nil || rec.DeletionTimestamp != nil {
				return false, fmt.Sprintf("record %s collected with its policy (err %v)", marked.Name, err)
			}
			return true, ""
		})
		startNodeRecovery(t)
	}
	eventually(t, 30*time.Second, "policy gone, record kept without owners", func(ctx context.Context) (bool, string) {
		err := nrHostCl.Get(ctx, client.ObjectKeyFromObject(pol), &v1alpha1.FailoverPolicy{})
		rec, _, lerr := nodeRecords(ctx, cluster, node)
		if lerr != nil {
			return false, lerr.Error()
		}
		if rec == nil || rec.Name != marked.Name || rec.DeletionTimestamp != nil {
			t.Fatalf("record lost with its policy: %s", describeRecord(rec))
		}
		return apierrors.IsNotFound(err) && len(rec.OwnerReferences) == 0, fmt.Sprintf("policy get: %v; owners %v", err, rec.OwnerReferences)
	})
	// The garbage collector had its chance: the record is still there.
	holds(t, 5*time.Second, "the record kept", func(ctx context.Context) (bool, string) {
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return rec != nil && rec.Name == marked.Name && rec.DeletionTimestamp == nil, describeRecord(rec)
	})
	n, err := getNode(ctx, cl, node)
	if err != nil || !hasOOSTaint(n) {
		t.Fatalf("taint gone from the powered-off node after the policy's deletion (err %v)", err)
	}
	restoreAndWaitClean(t, cl, cluster, node)
}
