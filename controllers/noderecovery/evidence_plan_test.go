package noderecovery

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/fencing"
)

// readLeaseFor is a Lease sighting of n1: version rv first read at first,
// last read unchanged for d (host clock).
func readLeaseFor(first time.Time, d time.Duration) leaseView {
	return leaseView{LeaseSighting: fencing.LeaseSighting{First: fencing.LeaseReading{Version: "7", Duration: 40 * time.Second},
		FirstAt: first, LastAt: first.Add(d), Window: fencing.SilenceWindow(40 * time.Second)}}
}

// renewedLease: fedfailover read the Lease change at t0 (the kubelet runs).
func renewedLease() leaseView {
	l := readLeaseFor(t0, 0)
	l.RenewedAt = l.FirstAt
	return l
}

// evidenceRecord is a record opened by evidence-first detection while n1
// reported Ready=True since readySince.
func evidenceRecord(readySince time.Time, acted bool) *v1alpha1.NodeRecovery {
	rec := actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, readySince, func(s *v1alpha1.NodeRecoveryRecordStatus) {
		s.ReadyStatus, s.Detection = string(corev1.ConditionTrue), v1alpha1.NodeLossDetectionEvidence
	})
	if !acted {
		rec.Status.IntentAt, rec.Status.ActedAt, rec.Status.Method, rec.Status.Phase = nil, nil, "", v1alpha1.RecoveryPhaseFenced
	}
	return rec
}

// TestDecideEvidenceFirst: a node is lost at once when its Machine shows it
// off and this process read its kubelet Lease unchanged over the silence
// window, whatever its Ready condition; never on evidence alone, never on a
// silent Lease alone, never with detection NotReady; every other gate holds.
func TestDecideEvidenceFirst(t *testing.T) {
	readySince := t0.Add(-time.Hour)
	ready := func() *corev1.Node { return node(corev1.ConditionTrue, readySince, nil) }
	window := fencing.SilenceWindow(40 * time.Second)
	silent := readLeaseFor(t0.Add(-15*time.Second), 15*time.Second) // unchanged 15 s: past the window
	young := readLeaseFor(t0.Add(-10*time.Second), 10*time.Second)  // unchanged 10 s: not yet
	notReady := func(p *v1alpha1.NodeRecoverySpec) { p.Detection = v1alpha1.NodeLossDetectionNotReady }
	forceDelete := func(p *v1alpha1.NodeRecoverySpec) { p.Method = v1alpha1.RecoveryMethodForceDelete }
	// intentOnly is a ForceDelete record whose intent (with lostTaint) is
	// recorded but not the action: a restart in between.
	intentOnly := func(lt v1alpha1.LostTaintOwnership) *v1alpha1.NodeRecovery {
		rec := evidenceRecord(readySince, true)
		rec.Status.Method, rec.Status.ActedAt, rec.Status.LostTaint = v1alpha1.RecoveryMethodForceDelete, nil, lt
		return rec
	}
	cases := []struct {
		name      string
		in        planInput
		phase     v1alpha1.RecoveryPhase
		step      step
		by        v1alpha1.NodeLossDetection
		finish    string
		message   string
		requeue   time.Duration
		noRecord  bool
		lostTaint bool
	}{
		{name: "Ready, infrastructure deleted, Lease silent: lost by evidence, taint at once",
			in:    planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(), Lease: silent, ServerMajor: 1, ServerMinor: 37},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepTaint, by: v1alpha1.NodeLossDetectionEvidence,
			message: "lost by evidence: Machine default/n1 is being deleted and its infrastructure is gone (InfrastructureReady=False, reason ObjectDeleted), " +
				"kubelet Lease not renewed for 15s as seen by fedfailover"},
		// ForceDelete on a node that still reports Ready=True: no node
		// lifecycle taint keeps the scheduler away from it, so the node gets
		// fedfailover's NoSchedule taint before its pods are deleted.
		{name: "Ready, infrastructure deleted, Lease silent, ForceDelete: force delete, the node tainted NoSchedule first",
			in:    planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(forceDelete), Lease: silent, ServerMajor: 1, ServerMinor: 37},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepForceDelete, by: v1alpha1.NodeLossDetectionEvidence, lostTaint: true},
		{name: "Auto on a member below 1.28 is ForceDelete: tainted NoSchedule first too",
			in:    planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(), Lease: silent, ServerMajor: 1, ServerMinor: 27},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepForceDelete, by: v1alpha1.NodeLossDetectionEvidence, lostTaint: true},
		{name: "ForceDelete on a node lost by its Ready condition: the lifecycle controller's taint keeps the scheduler away, none of ours",
			in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-time.Minute), nil), Machine: deletedMachine(), Policy: policy(forceDelete),
				Sighting: seen(corev1.ConditionUnknown, t0.Add(-time.Minute), t0.Add(-time.Minute)), ServerMajor: 1, ServerMinor: 37},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepForceDelete, by: v1alpha1.NodeLossDetectionNotReady},
		{name: "intent with the NoSchedule taint recorded, not the action (a restart): force delete, tainted first, whatever the loss now",
			in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-time.Second), nil), Record: intentOnly(v1alpha1.LostTaintOwned),
				Machine: deletedMachine(), Policy: policy(forceDelete), Lease: silent, Sighting: seen(corev1.ConditionUnknown, t0.Add(-time.Second), t0.Add(-time.Second))},
			phase: v1alpha1.RecoveryPhaseActing, step: stepForceDelete, by: v1alpha1.NodeLossDetectionEvidence, lostTaint: true},
		{name: "intent found a NoSchedule taint of someone else's: never added, never owned",
			in:    planInput{Node: ready(), Record: intentOnly(v1alpha1.LostTaintPreexisting), Machine: deletedMachine(), Policy: policy(forceDelete), Lease: silent},
			phase: v1alpha1.RecoveryPhaseActing, step: stepForceDelete, by: v1alpha1.NodeLossDetectionEvidence},
		{name: "acted: later force deletions add no taint (one removed by hand stays removed)",
			in: planInput{Node: ready(), Record: func() *v1alpha1.NodeRecovery {
				r := intentOnly(v1alpha1.LostTaintOwned)
				r.Status.ActedAt = r.Status.IntentAt
				return r
			}(), Machine: deletedMachine(), Policy: policy(forceDelete), Lease: silent},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, by: v1alpha1.NodeLossDetectionEvidence},
		{name: "Lease unchanged for less than the window: nothing yet, look again when it ends",
			in:      planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(), Lease: young, ServerMajor: 1, ServerMinor: 37},
			requeue: window - 10*time.Second},
		{name: "Lease silent but no evidence: nothing",
			in: planInput{Node: ready(), Machine: livingMachine(), Policy: policy(), Lease: silent, ServerMajor: 1, ServerMinor: 37}},
		{name: "Lease renewed: nothing",
			in:      planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(), Lease: renewedLease(), ServerMajor: 1, ServerMinor: 37},
			requeue: window},
		{name: "Lease read failed in this pass: nothing",
			in: planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(), ServerMajor: 1, ServerMinor: 37,
				Lease: leaseView{LeaseSighting: silent.LeaseSighting, err: "its kubelet Lease kube-node-lease/n1 cannot be read: timeout"}}},
		{name: "a node that never reported a Ready condition is not lost by evidence",
			in: planInput{Node: func() *corev1.Node { n := ready(); n.Status.Conditions = nil; return n }(), Machine: deletedMachine(), Policy: policy(), Lease: silent,
				ServerMajor: 1, ServerMinor: 37}},
		{name: "detection NotReady: a Ready node is never lost",
			in: planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(notReady), Lease: silent, ServerMajor: 1, ServerMinor: 37}},
		{name: "not Ready 3 s, evidence, Lease silent: no wait for notReadyFor",
			in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-3*time.Second), nil), Machine: deletedMachine(), Policy: policy(), Lease: silent,
				Sighting: seen(corev1.ConditionUnknown, t0.Add(-3*time.Second), t0.Add(-3*time.Second)), ServerMajor: 1, ServerMinor: 37},
			phase: v1alpha1.RecoveryPhaseFenced, step: stepTaint, by: v1alpha1.NodeLossDetectionEvidence},
		{name: "lost by evidence in a storm: suspended",
			in:    planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(), Lease: silent, Suspended: true, ServerMajor: 1, ServerMinor: 37},
			phase: v1alpha1.RecoveryPhaseSuspended, by: v1alpha1.NodeLossDetectionEvidence, message: "lost by evidence: "},
		{name: "lost by evidence under the not-Ready hold: suspended",
			in:    planInput{Node: ready(), Machine: deletedMachine(), Policy: policy(), Lease: silent, Hold: "2 of 3 nodes not Ready", ServerMajor: 1, ServerMinor: 37},
			phase: v1alpha1.RecoveryPhaseSuspended, by: v1alpha1.NodeLossDetectionEvidence},
		{name: "assumeFencedAfter is no evidence for this path",
			in: planInput{Node: ready(), Machine: livingMachine(), Lease: silent, ServerMajor: 1, ServerMinor: 37,
				Policy: policy(func(p *v1alpha1.NodeRecoverySpec) { d := v1alpha1.Duration("1s"); p.Fencing.AssumeFencedAfter = &d })}},
		{name: "acted by evidence, still Ready and silent: pods released",
			in:    planInput{Node: ready(), Record: evidenceRecord(readySince, true), Machine: deletedMachine(), Policy: policy(), Lease: silent},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, by: v1alpha1.NodeLossDetectionEvidence},
		// A restart: the new process has read the Lease once. The Ready
		// condition is the one the loss was found with: the record is kept,
		// and nothing is written, not even the taint's removal.
		{name: "acted by evidence, Ready, Lease not read renewed (a restart): kept, nothing written",
			in:    planInput{Node: ready(), Record: evidenceRecord(readySince, true), Machine: deletedMachine(), Policy: policy(), Lease: readLeaseFor(t0, 0)},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, message: "has not read its kubelet Lease renewed", requeue: window},
		{name: "acted by evidence, Lease unreadable: kept, nothing written",
			in: planInput{Node: ready(), Record: evidenceRecord(readySince, true), Machine: deletedMachine(), Policy: policy(),
				Lease: leaseView{LeaseSighting: renewedLease().LeaseSighting, err: "its kubelet Lease kube-node-lease/n1 does not exist"}},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepTrack, message: "does not exist"},
		{name: "acted by evidence, Lease read renewed: the kubelet runs, clean up",
			in:   planInput{Node: ready(), Record: evidenceRecord(readySince, true), Machine: deletedMachine(), Policy: policy(), Lease: renewedLease()},
			step: stepCleanup, finish: v1alpha1.FinishNodeReturned, message: "read its kubelet Lease renewed"},
		{name: "acted by evidence, a new Ready=True: the kubelet posted, clean up",
			in:   planInput{Node: node(corev1.ConditionTrue, t0.Add(-time.Second), nil), Record: evidenceRecord(readySince, true), Machine: deletedMachine(), Policy: policy(), Lease: readLeaseFor(t0, 0)},
			step: stepCleanup, finish: v1alpha1.FinishNodeReturned},
		{name: "acted by evidence, the lifecycle controller's Unknown continues it",
			in: planInput{Node: node(corev1.ConditionUnknown, t0.Add(-time.Second), nil, OutOfServiceTaint), Record: evidenceRecord(readySince, true),
				Machine: deletedMachine(), Policy: policy(), Lease: silent, Sighting: seen(corev1.ConditionUnknown, t0.Add(-time.Second), t0.Add(-time.Second))},
			phase: v1alpha1.RecoveryPhaseRecovering, step: stepForceDelete, by: v1alpha1.NodeLossDetectionEvidence},
		{name: "acted by evidence, then Ready=False: a kubelet posted, the record is closed",
			in: planInput{Node: node(corev1.ConditionFalse, t0.Add(-time.Second), nil, OutOfServiceTaint), Record: evidenceRecord(readySince, true),
				Machine: deletedMachine(), Policy: policy(), Lease: silent, Sighting: seen(corev1.ConditionFalse, t0.Add(-time.Second), t0.Add(-time.Second))},
			step: stepCleanup, finish: v1alpha1.FinishKubeletBack, by: v1alpha1.NodeLossDetectionEvidence},
		{name: "a record of a not-Ready loss on a Ready node: cleaned up as before",
			in:   planInput{Node: ready(), Record: actedRecord(v1alpha1.RecoveryMethodOutOfServiceTaint, t0.Add(-time.Minute)), Machine: deletedMachine(), Policy: policy(), Lease: readLeaseFor(t0, 0)},
			step: stepCleanup, finish: v1alpha1.FinishNodeReturned},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Now = t0
			p := decide(c.in)
			if p.Phase != c.phase || p.Step != c.step || p.Loss.By != c.by || p.Finish != c.finish {
				t.Fatalf("got phase %q step %q by %q finish %q (%s), want %q %q %q %q", p.Phase, p.Step, p.Loss.By, p.Finish, p.Message, c.phase, c.step, c.by, c.finish)
			}
			if p.LostTaint != c.lostTaint {
				t.Errorf("NoSchedule taint before the force deletion: %v, want %v", p.LostTaint, c.lostTaint)
			}
			if !strings.Contains(p.Message, c.message) {
				t.Errorf("message %q, want it to contain %q", p.Message, c.message)
			}
			if c.requeue > 0 && p.RequeueAfter != c.requeue {
				t.Errorf("requeue after %s, want %s", p.RequeueAfter, c.requeue)
			}
		})
	}
}

// TestStormCountsNodesLostByEvidence: the storm guard counts a Ready node
// lost by evidence as lost (and as not Ready for the hold), exactly as the
// node's own decision does.
func TestStormCountsNodesLostByEvidence(t *testing.T) {
	one := intstr.FromInt32(1)
	spec := policy(func(p *v1alpha1.NodeRecoverySpec) { p.MaxUnhealthy = &one })
	mk := func(name string) *corev1.Node {
		n := node(corev1.ConditionTrue, t0.Add(-time.Hour), nil)
		n.Name = name
		n.Spec.ProviderID = "kwok://" + name
		return n
	}
	m := func(name string) *clusterv1.Machine {
		x := deletedMachine()
		x.Name, x.Status.NodeRef.Name, x.Spec.ProviderID = name, name, "kwok://"+name
		return x
	}
	silent := readLeaseFor(t0.Add(-20*time.Second), 20*time.Second)
	v := &memberView{policy: &v1alpha1.FailoverPolicy{Spec: v1alpha1.FailoverPolicySpec{NodeRecovery: spec}},
		nodes:     []*corev1.Node{mk("a"), mk("b"), mk("c")},
		machines:  map[string]*clusterv1.Machine{"a": m("a"), "b": m("b")},
		leases:    map[string]leaseView{"a": silent, "b": silent},
		sightings: map[string]sighting{}}
	v.cluster, v.nodeScope = "member1", labels.Everything()
	w := newRecoveryWorld(t, spec, false, nil)
	out, err := w.r.stormStep(context.Background(), v, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Suspended || !strings.Contains(out.message, "2 of 3 nodes lost") {
		t.Fatalf("storm guard: suspended %v, %q; want a storm of 2 of 3 nodes lost (maxUnhealthy 1)", out.Suspended, out.message)
	}
	// Killed seconds apart: a is lost by evidence, b's Lease is not silent
	// yet. One lost node is within maxUnhealthy 1, but b, shown off by its
	// Machine, is held with it: a is not acted on alone.
	v.leases["b"] = readLeaseFor(t0.Add(-3*time.Second), 3*time.Second)
	w2 := newRecoveryWorld(t, spec, false, nil)
	out, err = w2.r.stormStep(context.Background(), v, t0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Suspended || !strings.Contains(out.hold, "2 of 3 nodes not Ready (or shown off by their Machines)") {
		t.Fatalf("storm guard with a lost and b on its way: suspended %v, hold %q; want no storm and a hold of 2 of 3", out.Suspended, out.hold)
	}
	// b's Machine shows nothing: a alone is within maxUnhealthy.
	delete(v.leases, "b")
	if out, err = w2.r.stormStep(context.Background(), v, t0); err != nil || out.Suspended || out.hold != "" {
		t.Fatalf("storm guard with one node lost: %+v, %v; want neither storm nor hold", out, err)
	}
}
