package noderecovery

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/fencing"
	"github.com/fedfailover/fedfailover/internal/remediation"
)

// TestDecideRemediation: the per-node decision (pure) with a remediation
// template: requested only for a node lost without evidence and past the
// gates; its success fences through the same verdict; failure and timeout
// block; a node with Machine evidence needs none.
func TestDecideRemediation(t *testing.T) {
	lostAt := t0.Add(-time.Minute)
	unknown := node(corev1.ConditionUnknown, lostAt, nil)
	long := seen(corev1.ConditionUnknown, lostAt, lostAt)
	withRem := func(p *v1alpha1.NodeRecoverySpec) {
		p.Remediation = &v1alpha1.RemediationSpec{Timeout: "1m", Template: v1alpha1.RemediationTemplateReference{
			APIVersion: "lab.fedfailover.io/v1alpha1", Kind: "LabRemediationTemplate", Name: "t", Namespace: "fence"}}
	}
	requestedRec := func(at time.Time, result v1alpha1.RemediationResult) *v1alpha1.NodeRecovery {
		rec := &v1alpha1.NodeRecovery{Spec: v1alpha1.NodeRecoveryRecordSpec{Cluster: "member1", Node: "n1"}}
		rec.UID = "rec-uid"
		rs := metav1.NewTime(lostAt)
		rec.Status = v1alpha1.NodeRecoveryRecordStatus{Phase: v1alpha1.RecoveryPhaseRemediating, ReadyStatus: string(corev1.ConditionUnknown), ReadySince: &rs,
			Remediation: &v1alpha1.RemediationRecord{Kind: "LabRemediation", Namespace: "fence", Name: "r", UID: "obj", RequestedAt: metav1.NewTime(at), Result: result}}
		return rec
	}
	obj := func(status metav1.ConditionStatus) remediationView {
		return remediationView{observed: &remediation.Observed{Kind: "LabRemediation", Namespace: "fence", Name: "r", UID: "obj", Ours: true, Succeeded: status}}
	}
	base := func(mut func(*planInput)) planInput {
		in := planInput{Node: unknown, Machine: livingMachine(), Sighting: long, ServerMajor: 1, ServerMinor: 37, Now: t0, Policy: policy(withRem)}
		mut(&in)
		return in
	}
	cases := []struct {
		name   string
		in     planInput
		phase  v1alpha1.RecoveryPhase
		step   step
		msg    string
		reason string
	}{
		{name: "lost without evidence: request", in: base(func(*planInput) {}), phase: v1alpha1.RecoveryPhaseRemediating, step: stepRemediate,
			msg: "requesting remediation (LabRemediation from template fence/t)"},
		{name: "storm: suspended, no request", in: base(func(in *planInput) { in.Suspended = true }), phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "hold: suspended, no request", in: base(func(in *planInput) { in.Hold = "2 of 3 nodes not Ready" }), phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "not lost yet: nothing", in: base(func(in *planInput) {
			in.Sighting = seen(corev1.ConditionUnknown, lostAt, t0.Add(-time.Second))
		})},
		{name: "Machine evidence: fenced, no remediation", in: base(func(in *planInput) { in.Machine = deletedMachine() }),
			phase: v1alpha1.RecoveryPhaseFenced, step: stepTaint, reason: string(fencing.EvidenceMachineInfrastructureDeleted)},
		{name: "requested, running: waiting", in: base(func(in *planInput) {
			in.Record, in.Remediation = requestedRec(t0.Add(-20*time.Second), ""), obj("")
		}), phase: v1alpha1.RecoveryPhaseRemediating, msg: "waiting for remediation LabRemediation fence/r since"},
		{name: "succeeded: fenced by it, taint", in: base(func(in *planInput) {
			in.Record, in.Remediation = requestedRec(t0.Add(-20*time.Second), ""), obj(metav1.ConditionTrue)
		}), phase: v1alpha1.RecoveryPhaseFenced, step: stepTaint, reason: string(fencing.EvidenceRemediationSucceeded)},
		{name: "succeeded, but storm: suspended", in: base(func(in *planInput) {
			in.Record, in.Remediation, in.Suspended = requestedRec(t0.Add(-20*time.Second), ""), obj(metav1.ConditionTrue), true
		}), phase: v1alpha1.RecoveryPhaseSuspended},
		{name: "failed: blocked", in: base(func(in *planInput) {
			in.Record, in.Remediation = requestedRec(t0.Add(-20*time.Second), ""), obj(metav1.ConditionFalse)
		}), phase: v1alpha1.RecoveryPhaseBlocked, msg: "failed: Succeeded=False"},
		{name: "timed out: blocked", in: base(func(in *planInput) {
			in.Record, in.Remediation = requestedRec(t0.Add(-61*time.Second), ""), obj("")
		}), phase: v1alpha1.RecoveryPhaseBlocked, msg: "timed out"},
		{name: "timed out earlier, success now: still blocked", in: base(func(in *planInput) {
			in.Record, in.Remediation = requestedRec(t0.Add(-2*time.Minute), v1alpha1.RemediationTimedOut), obj(metav1.ConditionTrue)
		}), phase: v1alpha1.RecoveryPhaseBlocked, msg: "timed out"},
		{name: "unreadable kind: blocked, says why", in: base(func(in *planInput) {
			in.Record, in.Remediation = requestedRec(t0, ""), remediationView{err: "fedfailover may not read LabRemediation"}
		}), phase: v1alpha1.RecoveryPhaseBlocked, msg: "may not read"},
		{name: "management cluster unreadable: requested all the same", in: base(func(in *planInput) {
			in.Machine, in.MachinesUnavailable = nil, "fencing evidence unavailable: management cluster of member member1"
		}), phase: v1alpha1.RecoveryPhaseRemediating, step: stepRemediate, msg: "requesting remediation"},
		{name: "management cluster unreadable, remediation failed: blocked, says both", in: base(func(in *planInput) {
			in.Machine, in.MachinesUnavailable = nil, "fencing evidence unavailable: management cluster of member member1"
			in.Record, in.Remediation = requestedRec(t0.Add(-20*time.Second), ""), obj(metav1.ConditionFalse)
		}), phase: v1alpha1.RecoveryPhaseBlocked, msg: "fencing evidence unavailable: management cluster of member member1"},
		{name: "no remediation policy: blocked as before", in: base(func(in *planInput) { in.Policy = policy() }), phase: v1alpha1.RecoveryPhaseBlocked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := decide(c.in)
			if p.Phase != c.phase || p.Step != c.step {
				t.Fatalf("phase %q step %q (%s), want %q %q", p.Phase, p.Step, p.Message, c.phase, c.step)
			}
			if !strings.Contains(p.Message, c.msg) {
				t.Errorf("message %q, want %q", p.Message, c.msg)
			}
			if c.reason != "" && p.Verdict.Reason != c.reason {
				t.Errorf("verdict %q, want %q", p.Verdict.Reason, c.reason)
			}
		})
	}
}

// TestRemediationTiedOnlyToAHostMachine: another party's remediation (in
// the host) named after the node's Machine is about the node only when the
// host holds that Machine; a Machine of the member's management cluster
// has its names in another API server, so a host object of the same names
// proves nothing and the stamped object does not name it.
func TestRemediationTiedOnlyToAHostMachine(t *testing.T) {
	n := node(corev1.ConditionUnknown, t0, nil)
	rec := &v1alpha1.NodeRecovery{}
	rec.UID = "rec-uid"
	named := &unstructured.Unstructured{}
	named.SetAPIVersion("lab.fedfailover.io/v1alpha1")
	named.SetKind("LabRemediation")
	named.SetNamespace("default")
	named.SetName("n1") // the Machine's namespace and name
	annotated := named.DeepCopy()
	annotated.SetAnnotations(map[string]string{contract.AnnotationRemediationCluster: "member1", contract.AnnotationRemediationNode: "n1"})
	host := &memberView{cluster: "member1", machines: map[string]*clusterv1.Machine{"n1": livingMachine()}}
	mgmt := &memberView{cluster: "member1", machines: map[string]*clusterv1.Machine{"n1": livingMachine()},
		machineClients: member.MachineClients{Management: "kube-federation-system/capi-mgmt"}}
	r := &Reconciler{}
	if hostMachine(host, n) == nil || !r.observe(named, host, n, rec).Tied {
		t.Error("a host Machine's namesake remediation is not tied to the node")
	}
	if hostMachine(mgmt, n) != nil || r.observe(named, mgmt, n, rec).Tied {
		t.Error("a remediation named after a management cluster's Machine is tied to the node")
	}
	if !r.observe(annotated, mgmt, n, rec).Tied {
		t.Error("a remediation annotated with the member and node is not tied to it")
	}
	other := livingMachine()
	other.Spec.ProviderID = "other://id"
	host.machines["n1"] = other
	if hostMachine(host, n) != nil || r.observe(named, host, n, rec).Tied {
		t.Error("a remediation named after a Machine of another providerID is tied to the node")
	}
}
