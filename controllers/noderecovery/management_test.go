package noderecovery

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// managementWorld is a recovery world whose member's Machines are in a
// management cluster (mgmt): the cache's Machine is mgmt's. The host holds
// the same Machine too (newRecoveryWorld puts it there), so a read that went
// to the host instead of the management cluster would find it.
func managementWorld(t *testing.T, spec *v1alpha1.NodeRecoverySpec, cached *clusterv1.Machine, inMgmt ...client.Object) (*recoveryWorld, client.Client) {
	t.Helper()
	w := newRecoveryWorld(t, spec, false, cached, lostNode("n1", t0.Add(-time.Minute)), claimPod("db-0", "n1", "data-db-0", true),
		boundClaim("data-db-0", "pv-db-0"), attachment("va-n1", "pv-db-0", "n1", true))
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgmt := fake.NewClientBuilder().WithScheme(s).WithObjects(inMgmt...).Build()
	fm := w.r.members.(*fakeMembers)
	fm.machineClients = member.MachineClients{Live: mgmt, Writer: mgmt, Management: member.DefaultNamespace + "/mgmt-kubeconfig"}
	return w, mgmt
}

// TestLiveRecheckReadsTheManagementCluster: the live re-read before the taint
// goes to the API server that holds the member's Machines. The management
// cluster has replaced the Machine (another UID) while the cache and the
// host still show the old one being deleted with its infrastructure gone:
// nothing is written. Reading the host, as before, tainted the node.
func TestLiveRecheckReadsTheManagementCluster(t *testing.T) {
	replaced := livingMachine()
	replaced.UID = "uid-machine-replacement"
	w, _ := managementWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), deletedMachine(), replaced)
	w.passLost()
	if nodeHasOOSTaint(w.node("n1")) {
		t.Fatal("node tainted on the host's Machine: the live re-read must go to the management cluster")
	}
	if rec := w.recoveries(); len(rec) != 1 || rec[0].Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(rec[0].Message, "live read") {
		t.Fatalf("recoveries = %+v, want Blocked by the live re-read", rec)
	}

	// The same Machine in the management cluster: the fence holds, the node
	// is tainted.
	w2, _ := managementWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), deletedMachine(), withUID(deletedMachine()))
	w2.passLost()
	if !nodeHasOOSTaint(w2.node("n1")) {
		t.Fatalf("node not tainted with the management cluster's evidence; recoveries %+v", w2.recoveries())
	}
}

// withUID gives m the UID newRecoveryWorld gives the cached Machine.
func withUID(m *clusterv1.Machine) *clusterv1.Machine {
	m.UID = "uid-machine-n1"
	return m
}

// TestManagementClusterUnavailableIsNoFence: a management cluster that
// cannot be read gives no Machine, so no evidence and no act; the node's
// verdict and one event on the policy say why. A live re-read that fails
// there refuses the write the same way.
func TestManagementClusterUnavailableIsNoFence(t *testing.T) {
	t.Run("lookup fails", func(t *testing.T) {
		w, _ := managementWorld(t, methodPolicy(v1alpha1.RecoveryMethodForceDelete), deletedMachine(), withUID(deletedMachine()))
		rec := events.NewFakeRecorder(100)
		w.r.recorder = rec
		w.r.members.(*fakeMembers).machinesErr = &member.ManagementError{Member: "member1", Secret: member.DefaultNamespace + "/mgmt-kubeconfig",
			Err: errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")}
		w.passLost()
		w.pass()
		if nodeHasOOSTaint(w.node("n1")) || !w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
			t.Fatal("a write without Machine evidence")
		}
		r := w.recoveries()
		if len(r) != 1 || r[0].Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(r[0].Message, "fencing evidence unavailable: management cluster of member member1") {
			t.Fatalf("recoveries = %+v, want Blocked naming the management cluster", r)
		}
		if n := countEvents(rec, ReasonEvidenceUnavailable); n != 1 {
			t.Errorf("%d %s events over three passes, want 1", n, ReasonEvidenceUnavailable)
		}
		w.r.members.(*fakeMembers).machinesErr = nil
		w.pass()
		if n := countEvents(rec, ReasonEvidenceAvailable); n != 1 {
			t.Errorf("%d %s events once it is back, want 1", n, ReasonEvidenceAvailable)
		}
		// With the management cluster's evidence back, the recovery goes on.
		if w.exists(&corev1.Pod{}, client.ObjectKey{Namespace: "default", Name: "db-0"}) {
			t.Errorf("pod of the fenced node not force-deleted once the evidence is back; recoveries %+v", w.recoveries())
		}
	})
	t.Run("live re-read fails", func(t *testing.T) {
		w, mgmt := managementWorld(t, methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint), deletedMachine(), withUID(deletedMachine()))
		broken := interceptor.NewClient(mgmt.(client.WithWatch), interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errors.New("Unauthorized")
			}})
		fm := w.r.members.(*fakeMembers)
		fm.machineClients.Live, fm.machineClients.Writer = broken, broken
		w.passLost()
		if nodeHasOOSTaint(w.node("n1")) {
			t.Fatal("node tainted although the management cluster could not be read live")
		}
		if r := w.recoveries(); len(r) != 1 || r[0].Phase != v1alpha1.RecoveryPhaseBlocked || !strings.Contains(r[0].Message, "fencing evidence unavailable: management cluster") {
			t.Fatalf("recoveries = %+v, want Blocked naming the management cluster", r)
		}
	})
}

// TestMachineDeletionInTheManagementCluster: requestMachineDeletion deletes
// the Machine where it lives, never a Machine of the same name in the host.
func TestMachineDeletionInTheManagementCluster(t *testing.T) {
	spec := methodPolicy(v1alpha1.RecoveryMethodOutOfServiceTaint)
	spec.Fencing.RequestMachineDeletion = true
	w, mgmt := managementWorld(t, spec, livingMachine(), withUID(livingMachine()))
	w.r.opts.EnableMachineDeletion = true
	// The cache's Machine is the management cluster's, as read (the
	// deletion carries its UID and resourceVersion).
	live := &clusterv1.Machine{}
	if err := mgmt.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "n1"}, live); err != nil {
		t.Fatal(err)
	}
	w.r.members.(*fakeMembers).machines["n1"] = live
	w.passLost()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "default", Name: "n1"}
	if err := mgmt.Get(ctx, key, &clusterv1.Machine{}); err == nil {
		t.Fatalf("the management cluster's Machine was not deleted; recoveries %+v", w.recoveries())
	}
	if err := w.host.Get(ctx, key, &clusterv1.Machine{}); err != nil {
		t.Fatalf("the host's Machine of the same name was touched: %v", err)
	}
}

func countEvents(rec *events.FakeRecorder, reason string) int {
	n := 0
	for {
		select {
		case e := <-rec.Events:
			if strings.Contains(e, " "+reason+" ") {
				n++
			}
		default:
			return n
		}
	}
}
