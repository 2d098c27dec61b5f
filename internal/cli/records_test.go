package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// TestRecoveryRowsFromRecords: the active record is the row of its node
// (not the policy's entry), a policy entry without a record (a deleted
// Node's pods) is still shown, and finished records are only counted.
func TestRecoveryRowsFromRecords(t *testing.T) {
	s := fixture()
	s.Policies[0].Status.Recoveries = append(s.Policies[0].Status.Recoveries, v1alpha1.NodeRecoveryStatus{
		Cluster: "member1", Node: "m1-node-9", Phase: v1alpha1.RecoveryPhaseRecovering, Method: v1alpha1.RecoveryMethodForceDelete,
		AffectedPods: 3, FencedAt: ago(time.Minute), Message: "Node deleted; force-deleting"})
	v := BuildStatus(s)
	got := map[string]RecoveryRow{}
	for _, r := range v.Recoveries {
		got[r.Cluster+"/"+r.Node] = r
	}
	if len(got) != 3 {
		t.Fatalf("rows %v, want member1/m1-node-2, member1/m1-node-9, member3/m3-node-1", v.Recoveries)
	}
	if r := got["member1/m1-node-2"]; r.Record != "member1.m1-node-2.5f1c0a9e3b" || r.RecoveredAt == nil || !strings.Contains(r.Message, "62.4s after fencing") {
		t.Errorf("m1-node-2 row %+v: want the active record, not the policy entry or the finished record", r)
	}
	if r := got["member1/m1-node-9"]; r.Record != "" || r.AffectedPods != 3 || r.ActedAt == nil {
		t.Errorf("m1-node-9 row %+v: want the policy entry", r)
	}
	if r := got["member3/m3-node-1"]; r.AffectedPods != 2 {
		t.Errorf("m3-node-1 row has %d pods: before the action the count comes from the policy entry", r.AffectedPods)
	}
	if v.FinishedRecoveries != 1 {
		t.Errorf("finished recoveries %d, want 1", v.FinishedRecoveries)
	}
	if m := v.Members[0]; m.Name != "member1" || m.LostNodes != 2 || m.FencedNodes != 2 {
		t.Errorf("member1 row %+v: want 2 lost, 2 fenced", m)
	}
}

// TestStormFromRecoveryGuard: the storm state shown is the member's
// RecoveryGuard, in status and in explain.
func TestStormFromRecoveryGuard(t *testing.T) {
	s := fixture()
	s.Guards = append(s.Guards, guard("member3", true, nil, "member3: 2 of 3 nodes lost, more than maxUnhealthy allows (1); recovery suspended"))
	v := BuildStatus(s)
	for _, m := range v.Members {
		if want := m.Name == "member3"; m.StormActive != want {
			t.Errorf("member %s storm %v, want %v", m.Name, m.StormActive, want)
		}
	}
	e, err := BuildExplanation(s, "member3", "m3-node-1", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Storm.Active || e.Storm.Guard != "member3" || !strings.Contains(e.Storm.Message, "2 of 3 nodes lost") {
		t.Errorf("storm %+v: want the RecoveryGuard's state", e.Storm)
	}
	var b bytes.Buffer
	if err := RenderExplanation(&b, e, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"State:          ACTIVE: recovery suspended in this member", "RecoveryGuard:  member3", "Message:        member3: 2 of 3 nodes lost"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, b.String())
		}
	}
}

// TestExplainFinishedRecords: a node with only finished records (one in
// dry run) answers from the newest and lists both with their flags.
func TestExplainFinishedRecords(t *testing.T) {
	s := fixture()
	s.Policies[0].Status.RecentDecisions = nil
	dry := record("member1.m1-node-1.77aa", "member1", "m1-node-1", 50*time.Minute)
	dry.Status.Phase, dry.Status.FinishReason, dry.Status.DryRun = v1alpha1.RecoveryPhaseFinished, v1alpha1.FinishKubeletBack, true
	dry.Status.Evidence, dry.Status.Method, dry.Status.FinishedAt = "MachineInfrastructureDeleted", v1alpha1.RecoveryMethodOutOfServiceTaint, ago(45*time.Minute)
	dry.Status.Message = "the kubelet reported again"
	older := record("member1.m1-node-1.11bb", "member1", "m1-node-1", 5*time.Hour)
	older.Status.Phase, older.Status.FinishReason, older.Status.FinishedAt = v1alpha1.RecoveryPhaseFinished, v1alpha1.FinishNodeReplaced, ago(4*time.Hour)
	older.Status.TaintPreexisting = true
	dry.Status.LostTaint = v1alpha1.LostTaintOwned
	s.Records = append(s.Records, older, dry)
	e, err := BuildExplanation(s, "member1", "m1-node-1", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Verdict != "No recovery in progress" || !strings.Contains(e.Detail, "45m ago (KubeletBack)") {
		t.Errorf("verdict %q, %q: want the newest finished record", e.Verdict, e.Detail)
	}
	if len(e.Records) != 2 || e.Records[0].Name != dry.Name || e.Records[1].Name != older.Name {
		t.Fatalf("records %+v: want newest first", e.Records)
	}
	var b bytes.Buffer
	if err := RenderExplanation(&b, e, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"- member1.m1-node-1.77aa (finished)", "Reason:       KubeletBack", "dry run: decided and reported",
		"Reason:       NodeReplaced", "out-of-service taint not added by fedfailover",
		"NoSchedule taint failover.fedfailover.io/lost added by fedfailover before the force deletion", "Finished:     2026-11-30T11:15:00Z (45m ago)"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "77aa") > strings.Index(out, "11bb") {
		t.Errorf("older record listed first:\n%s", out)
	}
}

// TestExplainMemberOnlyInRecords: a member that left kubefed and every
// policy's status can still be explained from its records.
func TestExplainMemberOnlyInRecords(t *testing.T) {
	s := fixture()
	s.Records = append(s.Records, record("gone.n1.aa", "gone", "n1", time.Hour))
	e, err := BuildExplanation(s, "gone", "n1", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Records) != 1 {
		t.Errorf("records %+v, want gone.n1.aa", e.Records)
	}
}

// TestTwoActiveRecords: explain answers from the record fedfailover
// continues (the oldest) and says there are two.
func TestTwoActiveRecords(t *testing.T) {
	s := fixture()
	s.Policies[0].Status.Recoveries = nil
	newer := record("member3.m3-node-1.newer", "member3", "m3-node-1", time.Minute)
	newer.Status.Phase = v1alpha1.RecoveryPhaseSuspended
	s.Records = append(s.Records, newer)
	e, err := BuildExplanation(s, "member3", "m3-node-1", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Records[0].Name != "member3.m3-node-1.9a2f4c6d80" || e.Verdict != "Not recovered: no fencing evidence" {
		t.Errorf("first record %s, verdict %q: want the oldest active record (Blocked)", e.Records[0].Name, e.Verdict)
	}
	if !strings.Contains(strings.Join(e.Notes, "\n"), "2 active NodeRecovery records for this node") {
		t.Errorf("notes %q lack the two active records", e.Notes)
	}
}

// TestExplainRemediation: a node whose recovery waits for a remediation
// says which one and since when; one whose remediation failed says so.
func TestExplainRemediation(t *testing.T) {
	s := fixture()
	s.Policies[0].Status.RecentDecisions = nil
	waiting := record("member1.m1-node-1.33cc", "member1", "m1-node-1", 2*time.Minute)
	waiting.Status.Phase = v1alpha1.RecoveryPhaseRemediating
	waiting.Status.Remediation = &v1alpha1.RemediationRecord{APIVersion: "lab.fedfailover.io/v1alpha1", Kind: "LabRemediation",
		Namespace: "fence", Name: "member1.m1-node-1.33cc", UID: "r1", RequestedAt: *ago(time.Minute)}
	waiting.Status.Message = "waiting for remediation LabRemediation fence/member1.m1-node-1.33cc since 2026-11-30T11:59:00Z (timeout 5m0s)"
	s.Records = append(s.Records, waiting)
	e, err := BuildExplanation(s, "member1", "m1-node-1", nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Verdict != "Lost: waiting for remediation LabRemediation fence/member1.m1-node-1.33cc" || !strings.Contains(e.Detail, "timeout 5m0s") {
		t.Errorf("verdict %q, %q", e.Verdict, e.Detail)
	}
	var b bytes.Buffer
	if err := RenderExplanation(&b, e, now); err != nil {
		t.Fatal(err)
	}
	if want := "waiting for remediation LabRemediation fence/member1.m1-node-1.33cc (requested by fedfailover) since "; !strings.Contains(b.String(), want) {
		t.Errorf("explain lacks %q:\n%s", want, b.String())
	}

	waiting.Status.Phase = v1alpha1.RecoveryPhaseBlocked
	waiting.Status.Remediation.Foreign, waiting.Status.Remediation.Result = true, v1alpha1.RemediationFailed
	waiting.Status.Remediation.Message = "remediation LabRemediation fence/member1.m1-node-1.33cc failed: Succeeded=False, reason AgentFailed"
	s.Records[len(s.Records)-1] = waiting
	if e, err = BuildExplanation(s, "member1", "m1-node-1", nil, "", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.Verdict, "Not recovered: remediation LabRemediation") {
		t.Errorf("verdict %q", e.Verdict)
	}
	b.Reset()
	if err := RenderExplanation(&b, e, now); err != nil {
		t.Fatal(err)
	}
	if want := "(another party's, waited for) Failed: remediation"; !strings.Contains(b.String(), want) {
		t.Errorf("explain lacks %q:\n%s", want, b.String())
	}
}
