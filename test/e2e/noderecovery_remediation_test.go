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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/remediation"
	"github.com/fedfailover/fedfailover/test/lab"
	"github.com/fedfailover/fedfailover/test/lab/fenceagent"
	"github.com/fedfailover/fedfailover/test/paths"
)

// Remediation through templates on the lab: a partitioned node (its kwok
// process stopped: no Machine evidence, the infrastructure says nothing)
// is lost after the member's grace period and notReadyFor; the policy
// names a LabRemediationTemplate, and the lab's own fence agent
// (test/lab/fenceagent, run by this process) powers the node off (kills
// its kwok process) after a delay and reports Succeeded=True, or, in mode
// Fail, reports Succeeded=False and leaves the node alone.

// labFenceAgent installs the fence agent's CRDs in the lab host (the lab
// installs them too; a lab started by an older version did not), creates a
// host namespace with a template of the given delay and mode, and runs the
// lab's fence agent for it until the test ends. It returns the agent and
// the policy's remediation.
func labFenceAgent(t *testing.T, ns string, delay time.Duration, mode string) (*fenceagent.Agent, *v1alpha1.RemediationSpec) {
	t.Helper()
	host := nrHost(t)
	cfg, err := nrHostConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := paths.FenceAgentCRDDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true}); err != nil {
		t.Fatalf("installing the fence agent's CRDs in the lab host: %v", err)
	}
	ctx := t.Context()
	if err := host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tmpl := fenceagent.Template(ns, "power-off", delay, mode)
	if err := host.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	agent, err := theLab.FenceAgent(fenceagent.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	actx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); agent.Run(actx) }()
	t.Cleanup(func() {
		stop()
		<-done
		// The remediations are the records' (garbage-collected with them);
		// the template and namespace are the test's.
		_ = host.Delete(context.Background(), tmpl)
	})
	return agent, &v1alpha1.RemediationSpec{Timeout: "2m", Template: v1alpha1.RemediationTemplateReference{
		APIVersion: fenceagent.GroupVersion.String(), Kind: fenceagent.TemplateGVK.Kind, Name: "power-off", Namespace: ns}}
}

// withLabRemediation lets the test's manager watch the lab's kind, as
// --remediation-kind does.
func withLabRemediation(o *controllers.Options) {
	o.NodeRecovery.RemediationKinds = []schema.GroupVersionKind{fenceagent.RemediationGVK}
}

// nodeRemediations lists the LabRemediations of ns about the node.
func nodeRemediations(ctx context.Context, ns, cluster, node string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(fenceagent.GroupVersion.WithKind("LabRemediationList"))
	if err := nrHostCl.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(u unstructured.Unstructured) bool {
		a := u.GetAnnotations()
		return a[contract.AnnotationRemediationCluster] != cluster || a[contract.AnnotationRemediationNode] != node
	}), nil
}

// TestNodeRecoveryRemediationPartitionFenced: a partitioned node gets one
// remediation; the fence agent powers it off 3 s later and reports
// success; only then is the node tainted (the lab's ground truth: its kwok
// process was dead before fedfailover recorded the intent, and when the
// taint was first seen), and the StatefulSet's replacement runs elsewhere
// with the volume. When the node is back, the remediation is deleted.
func TestNodeRecoveryRemediationPartitionFenced(t *testing.T) {
	ctx := t.Context()
	const cluster, ns, fenceNS = "member1", "nr-remediation", "fence-ok"
	agent, rem := labFenceAgent(t, fenceNS, 3*time.Second, fenceagent.ModePowerOff)
	startNodeRecovery(t, withLabRemediation)
	pol := nrPolicy(t, "nr-remediation", func(s *v1alpha1.NodeRecoverySpec) { s.Remediation = rem })
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)

	partitioned := time.Now()
	if err := theLab.Partition(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theLab.Heal(node) }) // a no-op once the agent powered it off
	var requested time.Time
	eventually(t, 90*time.Second, "one remediation requested for "+node, func(ctx context.Context) (bool, string) {
		rs, err := nodeRemediations(ctx, fenceNS, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		if len(rs) > 1 {
			t.Fatalf("%d remediations for %s, want one", len(rs), node)
		}
		if n, _ := getNode(ctx, cl, node); n != nil && hasOOSTaint(n) {
			t.Fatalf("%s tainted before its remediation was requested", node)
		}
		requested = time.Now()
		return len(rs) == 1, fmt.Sprintf("%d remediations", len(rs))
	})
	n, tainted := firstTaint(t, cl, node, 60*time.Second)
	gone, err := theLab.NodeProcessGone(node)
	if err != nil || !gone {
		t.Fatalf("%s tainted (Ready %s) while its kwok process runs (gone %v, %v): the lab's ground truth says it was not fenced",
			node, readyCondition(n), gone, err)
	}
	i := slices.IndexFunc(agent.Actions(), func(a fenceagent.Action) bool { return a.Node == node && a.Result == fenceagent.ReasonPoweredOff })
	if i < 0 {
		t.Fatalf("tainted, but the fence agent never powered %s off: %+v", node, agent.Actions())
	}
	off := agent.Actions()[i].At
	if !tainted.After(off) {
		t.Fatalf("taint seen at %s, before the agent powered %s off at %s", tainted.Format(time.RFC3339Nano), node, off.Format(time.RFC3339Nano))
	}
	// The intent is recorded in whole seconds (same clock: the agent and the
	// manager run in this process). The record's remediation result is
	// written by the pass after the one that tainted, so it is polled.
	eventually(t, 15*time.Second, "the record says the remediation succeeded and the intent came after the power-off", func(ctx context.Context) (bool, string) {
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		ok := rec != nil && rec.Status.Evidence == "RemediationSucceeded" && rec.Status.IntentAt != nil && !rec.Status.IntentAt.Time.Before(off.Truncate(time.Second)) &&
			rec.Status.Remediation != nil && rec.Status.Remediation.Result == v1alpha1.RemediationSucceeded
		return ok, fmt.Sprintf("powered off at %s; record %s", off.Format(time.RFC3339Nano), describeRecord(rec))
	})
	t.Logf("partition -> remediation requested %.1fs, -> powered off %.1fs, -> tainted %.1fs",
		requested.Sub(partitioned).Seconds(), off.Sub(partitioned).Seconds(), tainted.Sub(partitioned).Seconds())
	waitRecovered(t, cl, pol.Name, cluster, ns, "db", pv, node, 90*time.Second)
	t.Logf("replacement Running %.1fs after the partition, %.1fs after the taint", time.Since(partitioned).Seconds(), time.Since(tainted).Seconds())
	if rs, err := nodeRemediations(ctx, fenceNS, cluster, node); err != nil || len(rs) != 1 {
		t.Fatalf("%d remediations for %s (%v), want exactly one for the loss", len(rs), node, err)
	}

	restoreAndWaitClean(t, cl, cluster, node)
	eventually(t, 30*time.Second, "the remediation deleted once the node is back", func(ctx context.Context) (bool, string) {
		rs, err := nodeRemediations(ctx, fenceNS, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return len(rs) == 0, fmt.Sprintf("%d remediations", len(rs))
	})
}

// TestNodeRecoveryRemediationFailingAgentBlocked: the fence agent reports
// Succeeded=False: the recovery is Blocked with the agent's reason, the
// node is not powered off, nothing of its pod or volume is touched; healed,
// the node is Ready with the same pod, the record closed and the
// remediation deleted.
func TestNodeRecoveryRemediationFailingAgentBlocked(t *testing.T) {
	ctx := t.Context()
	const cluster, ns, fenceNS = "member2", "nr-remediation-fail", "fence-fail"
	_, rem := labFenceAgent(t, fenceNS, time.Second, fenceagent.ModeFail)
	startNodeRecovery(t, withLabRemediation)
	nrPolicy(t, "nr-remediation-fail", func(s *v1alpha1.NodeRecoverySpec) { s.Remediation = rem })
	cl := theLab.MustClient(cluster)
	node := lab.NodeName(cluster, 2)
	pod, pv := deploymentOnNode(t, cluster, ns, node)
	restoreAfter(t, cluster, node)

	if err := theLab.Partition(node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theLab.Heal(node) })
	unchanged := untouched(cl, ns, pod, pv, node)
	eventually(t, 90*time.Second, "the recovery Blocked by the failed remediation", func(ctx context.Context) (bool, string) {
		if ok, why := unchanged(ctx); !ok {
			t.Fatal(why)
		}
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil || rec == nil {
			return false, fmt.Sprintf("record %v, %v", rec, err)
		}
		return rec.Status.Phase == v1alpha1.RecoveryPhaseBlocked && strings.Contains(rec.Status.Message, "Succeeded=False, reason AgentFailed") &&
			rec.Status.Remediation != nil && rec.Status.Remediation.Result == v1alpha1.RemediationFailed, describeRecord(rec)
	})
	// Hold past the point where a taint would have come (but heal before
	// the lab's unreachable toleration evicts the pod).
	holds(t, 6*time.Second, "partitioned node left alone", func(ctx context.Context) (bool, string) {
		if gone, err := theLab.NodeProcessGone(node); err != nil || gone {
			return false, fmt.Sprintf("the node's kwok process is gone (%v): the failing agent powered it off", err)
		}
		return unchanged(ctx)
	})
	rs, err := nodeRemediations(ctx, fenceNS, cluster, node)
	if err != nil || len(rs) != 1 {
		t.Fatalf("%d remediations (%v), want the one failed", len(rs), err)
	}
	if o := remediation.Read(&rs[0], ""); o.Succeeded != metav1.ConditionFalse {
		t.Fatalf("remediation %s: Succeeded=%q, want False", o.Ref(), o.Succeeded)
	}

	if err := theLab.Heal(node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "healed: node Ready, same pod, record closed, remediation deleted", func(ctx context.Context) (bool, string) {
		if ok, why := unchanged(ctx); !ok {
			return false, why
		}
		n, _ := getNode(ctx, cl, node)
		if n == nil || lab.NodeReadyStatus(n) != corev1.ConditionTrue {
			return false, "not Ready yet"
		}
		rec, _, err := nodeRecords(ctx, cluster, node)
		if err != nil || rec != nil {
			return false, fmt.Sprintf("record %s, %v", describeRecord(rec), err)
		}
		rs, err := nodeRemediations(ctx, fenceNS, cluster, node)
		if err != nil {
			return false, err.Error()
		}
		return len(rs) == 0, fmt.Sprintf("%d remediations", len(rs))
	})
}
