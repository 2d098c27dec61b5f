//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/noderecovery"
	"github.com/fedfailover/fedfailover/test/lab"
)

// Living next to another remediator (docs/coexistence.md): a second
// remediator (self-node-remediation's out-of-service strategy, a fence
// agent, a cloud provider) adds the out-of-service taint itself to a node
// that is off, and fedfailover recovers the same loss.

// remediatorDelay is how soon after the power-off the other remediator
// taints the node: well inside the Lease silence window (6 s for the lab's
// 8 s Lease) that fedfailover waits out before it acts by evidence, so the
// other remediator is first.
const remediatorDelay = 2 * time.Second

// remediatorAct is what the other remediator did.
type remediatorAct struct {
	// Added: its patch added the taint; Found: a taint was there already.
	Added, Found bool
	At           time.Time
	Err          error
}

// anotherRemediator plays the second remediator: after delay it adds the
// out-of-service taint (the value and effect the Kubernetes documentation
// gives, which are fedfailover's too) to the node if the lab says the node
// is off and no out-of-service taint is there yet, with an optimistic lock
// on the Node it read, as a controller's update has, retried on conflict.
func anotherRemediator(ctx context.Context, cl client.Client, node string, delay time.Duration) <-chan remediatorAct {
	out := make(chan remediatorAct, 1)
	go func() {
		t := time.NewTimer(delay) // its reaction time, part of the scenario
		defer t.Stop()
		select {
		case <-ctx.Done():
			out <- remediatorAct{Err: ctx.Err()}
			return
		case <-t.C:
		}
		for range 10 {
			off, err := theLab.Faulted(node)
			if err != nil {
				out <- remediatorAct{Err: fmt.Errorf("asking the lab whether %s is off: %w", node, err)}
				return
			}
			if !off {
				out <- remediatorAct{Err: fmt.Errorf("the lab says %s is not off: nothing to remediate", node)}
				return
			}
			n, err := getNode(ctx, cl, node)
			if err != nil {
				out <- remediatorAct{Err: err}
				return
			}
			if hasOOSTaint(n) {
				out <- remediatorAct{Found: true, At: time.Now()}
				return
			}
			patch := client.MergeFromWithOptions(n.DeepCopy(), client.MergeFromWithOptimisticLock{})
			n.Spec.Taints = append(n.Spec.Taints, noderecovery.OutOfServiceTaint)
			err = cl.Patch(ctx, n, patch)
			if apierrors.IsConflict(err) {
				continue // the node changed since read: look again
			}
			out <- remediatorAct{Added: err == nil, At: time.Now(), Err: err}
			return
		}
		out <- remediatorAct{Err: fmt.Errorf("node %s kept changing under the patch", node)}
	}()
	return out
}

// memberWrite is one successful write in a member's audit log.
type memberWrite struct {
	lab.AuditEvent
	User struct {
		Username string `json:"username"`
	} `json:"user"`
}

// memberWrites reads the member's audit log: every successful write to
// resource in namespace ns ("" for cluster-scoped) since since.
func memberWrites(t *testing.T, cluster, resource, ns string, since time.Time) []memberWrite {
	t.Helper()
	st, err := theLab.State()
	if err != nil {
		t.Fatal(err)
	}
	c := st.Cluster(cluster)
	if c == nil {
		t.Fatalf("no cluster %s in the lab", cluster)
	}
	b, err := os.ReadFile(lab.AuditLogPath(c))
	if err != nil {
		t.Fatalf("the member's audit log (the e2e lab writes one): %v", err)
	}
	var out []memberWrite
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		e, ok := lab.SuccessfulWrite(sc.Bytes())
		if !ok || e.Resource() != resource || e.ObjectRef.Namespace != ns || e.Received.Before(since) {
			continue
		}
		w := memberWrite{AuditEvent: e}
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		out = append(out, w)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fedfailover's writes come with its member user agent.
func (w memberWrite) byFedfailover() bool {
	return strings.HasPrefix(w.UserAgent, "fedfailover-member")
}

// deletedPod is the pod a delete's response names (a service account's
// writes are audited with their response).
func (w memberWrite) deletedPod() (uid types.UID, node string) {
	var p corev1.Pod
	_ = json.Unmarshal(w.ResponseObject, &p)
	return p.UID, p.Spec.NodeName
}

// TestNodeRecoveryCoexistsWithAnotherRemediator: a node is powered off with
// its Machine's infrastructure deleted; 2 s later another remediator taints
// it out-of-service itself. fedfailover, finding the loss by evidence
// 6 s or more after the power-off, records the taint as not its own and
// adds none; there is one recovery (one record for the loss), the lost pod
// is force-deleted by fedfailover at most once and nothing else is
// deleted (the replacement keeps its UID to the end), and when the node
// comes back fedfailover closes its record and leaves the other
// remediator's taint in place for its owner to remove.
func TestNodeRecoveryCoexistsWithAnotherRemediator(t *testing.T) {
	ctx := t.Context()
	const cluster, ns = "member1", "nr-coexist"
	startNodeRecovery(t)
	nrPolicy(t, "nr-coexist", nil) // evidence-first, method Auto (the taint)
	cl := theLab.MustClient(cluster)
	pod, pv := stsOnLostNode(t, cluster, ns)
	node := pod.Spec.NodeName
	restoreAfter(t, cluster, node)
	t.Cleanup(func() { untaint(t, cl, node) }) // as the other remediator would, once done

	powerOff := time.Now()
	if err := theLab.PowerOff(ctx, node, lab.EvidenceMachineDeleted); err != nil {
		t.Fatal(err)
	}
	var other remediatorAct
	select {
	case other = <-anotherRemediator(ctx, cl, node, remediatorDelay):
	case <-time.After(30 * time.Second):
		t.Fatal("the other remediator did not finish within 30s")
	}
	if other.Err != nil || !other.Added {
		t.Fatalf("the other remediator %.1fs after the power-off: %+v; want its taint added first (fedfailover acts by evidence only after the 5 s silence window)",
			other.At.Sub(powerOff).Seconds(), other)
	}

	var rec *v1alpha1.NodeRecovery
	eventually(t, 90*time.Second, "fedfailover recovers the same loss", func(ctx context.Context) (bool, string) {
		var err error
		if rec, _, err = nodeRecords(ctx, cluster, node); err != nil {
			return false, err.Error()
		}
		return rec != nil && rec.Status.ActedAt != nil, describeRecord(rec)
	})
	if !rec.Status.TaintPreexisting || rec.Status.Method != v1alpha1.RecoveryMethodOutOfServiceTaint {
		t.Fatalf("%s taintPreexisting=%v: want the taint method with the other remediator's taint recorded as pre-existing",
			describeRecord(rec), rec.Status.TaintPreexisting)
	}
	repl := replacedElsewhere(t, cl, ns, pv, node)
	t.Logf("replacement Running on %s %.1fs after the power-off", repl.Spec.NodeName, time.Since(powerOff).Seconds())

	restoreAndWaitClosed(t, cl, cluster, node, true)
	holds(t, 5*time.Second, "the other remediator's taint stays", func(ctx context.Context) (bool, string) {
		n, err := getNode(ctx, cl, node)
		if err != nil {
			return false, err.Error()
		}
		return hasOOSTaint(n), fmt.Sprintf("taints %v", n.Spec.Taints)
	})

	// One recovery: one record opened for this loss (created since the
	// power-off, on this machine's one clock), now closed.
	active, finished, err := nodeRecords(ctx, cluster, node)
	if err != nil {
		t.Fatal(err)
	}
	if active != nil {
		finished = append(finished, *active)
	}
	var opened []string
	for _, r := range finished {
		if !r.CreationTimestamp.Time.Before(powerOff.Truncate(time.Second)) {
			opened = append(opened, r.Name+" "+string(r.Status.Phase))
		}
	}
	if len(opened) != 1 || opened[0] != rec.Name+" "+string(v1alpha1.RecoveryPhaseFinished) {
		t.Fatalf("records opened since the power-off: %v; want exactly %s, finished", opened, rec.Name)
	}
	// No double force-delete, read from the member's audit log: fedfailover
	// deleted only the lost pod, at most once, and nobody deleted the
	// replacement.
	fedfailoverDeletes := 0
	for _, w := range memberWrites(t, cluster, "pods", ns, powerOff) {
		if w.Verb != "delete" {
			continue
		}
		uid, on := w.deletedPod()
		if w.byFedfailover() {
			fedfailoverDeletes++
			if uid != pod.UID || on != node {
				t.Errorf("fedfailover deleted pod %s/%s uid %s on %s at %s: only the lost pod (uid %s on %s) may be", ns, w.ObjectRef.Name, uid, on,
					w.Received.Format(time.RFC3339Nano), pod.UID, node)
			}
		}
	}
	if fedfailoverDeletes > 1 {
		t.Errorf("fedfailover deleted the lost pod %d times, want at most once", fedfailoverDeletes)
	}
	for _, w := range memberWrites(t, cluster, "nodes", "", powerOff) {
		if w.byFedfailover() && w.ObjectRef.Name == node && bytes.Contains(w.RequestObject, []byte(corev1.TaintNodeOutOfService)) {
			t.Errorf("fedfailover wrote the out-of-service taint on %s at %s: the other remediator's was there", node, w.Received.Format(time.RFC3339Nano))
		}
	}
	now, err := getPod(ctx, cl, ns, repl.Name)
	if err != nil || now.UID != repl.UID {
		t.Fatalf("the replacement %s (uid %s) is gone or replaced (%v, %v): deleted a second time", repl.Name, repl.UID, now, err)
	}
	t.Logf("fedfailover force-deleted the lost pod %d time(s); the other remediator's taint stays", fedfailoverDeletes)
}
