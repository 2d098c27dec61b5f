package remediation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

var (
	t0     = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	policy = &v1alpha1.RemediationSpec{Timeout: "1m", Template: v1alpha1.RemediationTemplateReference{
		APIVersion: "lab.fedfailover.io/v1alpha1", Kind: "LabRemediationTemplate", Name: "power-off", Namespace: "fence"}}
)

func recorded(result v1alpha1.RemediationResult) *v1alpha1.RemediationRecord {
	return &v1alpha1.RemediationRecord{Kind: "LabRemediation", Namespace: "fence", Name: "m.n.abc", UID: "u1",
		RequestedAt: metav1.NewTime(t0), Result: result}
}

func observed(mut func(*Observed)) *Observed {
	o := &Observed{Kind: "LabRemediation", Namespace: "fence", Name: "m.n.abc", UID: "u1", Ours: true, Created: t0}
	if mut != nil {
		mut(o)
	}
	return o
}

func TestDecide(t *testing.T) {
	cases := []struct {
		name       string
		in         Input
		want       Action
		result     v1alpha1.RemediationResult
		msg        string
		requeue    time.Duration
		wantsProof bool
	}{
		{name: "no policy, nothing recorded", in: Input{Now: t0}, want: None},
		{name: "nothing recorded or found: request", in: Input{Policy: policy, Now: t0}, want: Request, msg: "requesting remediation (LabRemediation"},
		{name: "another party's object for the node: adopt, never a second",
			in:   Input{Policy: policy, Now: t0, Observed: observed(func(o *Observed) { o.Ours = false; o.Name = "m-1" })},
			want: Adopt, msg: "created for this node by another party"},
		{name: "ours found before it was recorded: adopt", in: Input{Policy: policy, Now: t0, Observed: observed(nil)}, want: Adopt},
		{name: "waiting", in: Input{Policy: policy, Recorded: recorded(""), Observed: observed(nil), Now: t0.Add(20 * time.Second)},
			want: Wait, msg: "waiting for remediation LabRemediation fence/m.n.abc since 2026-01-02T03:04:05Z", requeue: 40 * time.Second},
		{name: "Unknown is still waiting", in: Input{Policy: policy, Recorded: recorded(""), Now: t0,
			Observed: observed(func(o *Observed) { o.Succeeded = metav1.ConditionUnknown })}, want: Wait, requeue: time.Minute},
		{name: "timeout", in: Input{Policy: policy, Recorded: recorded(""), Observed: observed(nil), Now: t0.Add(time.Minute)},
			want: Fail, result: v1alpha1.RemediationTimedOut, msg: "timed out: no success within 1m0s"},
		{name: "a clock behind the request's waits the whole timeout",
			in:   Input{Policy: policy, Recorded: recorded(""), Observed: observed(nil), Now: t0.Add(-time.Hour)},
			want: Wait, requeue: time.Minute},
		{name: "succeeded: proof", in: Input{Policy: policy, Recorded: recorded(""), Now: t0.Add(time.Second),
			Observed: observed(func(o *Observed) { o.Succeeded, o.Reason = metav1.ConditionTrue, "PoweredOff" })},
			want: Proven, result: v1alpha1.RemediationSucceeded, wantsProof: true},
		{name: "failed", in: Input{Policy: policy, Recorded: recorded(""), Now: t0,
			Observed: observed(func(o *Observed) { o.Succeeded, o.Reason, o.Message = metav1.ConditionFalse, "AgentFailed", "no power" })},
			want: Fail, result: v1alpha1.RemediationFailed, msg: "failed: Succeeded=False, reason AgentFailed: no power"},
		{name: "failed is final, even if it succeeds later", in: Input{Policy: policy, Recorded: recorded(v1alpha1.RemediationFailed), Now: t0,
			Observed: observed(func(o *Observed) { o.Succeeded = metav1.ConditionTrue })}, want: Fail},
		{name: "timed out is final", in: Input{Policy: policy, Recorded: recorded(v1alpha1.RemediationTimedOut), Now: t0,
			Observed: observed(func(o *Observed) { o.Succeeded = metav1.ConditionTrue })}, want: Fail, msg: "timed out"},
		{name: "deleted before success", in: Input{Policy: policy, Recorded: recorded(""), Now: t0},
			want: Fail, result: v1alpha1.RemediationFailed, msg: "was deleted before it reported success"},
		{name: "another object under the recorded name is not the remediation", in: Input{Policy: policy, Recorded: recorded(""), Now: t0,
			Observed: observed(func(o *Observed) { o.UID = "u2"; o.Succeeded = metav1.ConditionTrue })},
			want: Fail, result: v1alpha1.RemediationFailed},
		{name: "gone after success: no proof, no failure", in: Input{Policy: policy, Recorded: recorded(v1alpha1.RemediationSucceeded), Now: t0},
			want: None, msg: "no evidence any more"},
		{name: "being deleted: its success no longer counts", in: Input{Policy: policy, Recorded: recorded(""), Now: t0,
			Observed: observed(func(o *Observed) { o.Deleting = true; o.Succeeded = metav1.ConditionTrue })},
			want: Fail, result: v1alpha1.RemediationFailed, msg: "being deleted"},
		{name: "another party's success, tied and newer than the record: proof",
			in: Input{Policy: policy, Recorded: recorded(""), LossSince: t0.Add(-time.Second), Now: t0,
				Observed: observed(func(o *Observed) { o.Ours, o.Tied, o.Succeeded = false, true, metav1.ConditionTrue })},
			want: Proven, wantsProof: true},
		{name: "another party's success from before the loss: waited for, no proof",
			in: Input{Policy: policy, Recorded: recorded(""), LossSince: t0.Add(time.Second), Now: t0,
				Observed: observed(func(o *Observed) { o.Ours, o.Tied, o.Succeeded = false, true, metav1.ConditionTrue })},
			want: Wait, msg: "created before fedfailover saw this loss begin"},
		{name: "creation times have whole seconds: the loss's second counts",
			in: Input{Policy: policy, Recorded: recorded(""), LossSince: t0.Add(700 * time.Millisecond), Now: t0.Add(time.Second),
				Observed: observed(func(o *Observed) { o.Ours, o.Tied, o.Succeeded = false, true, metav1.ConditionTrue })},
			want: Proven, wantsProof: true},
		{name: "another party's success while this process has not seen the loss begin: no proof",
			in: Input{Policy: policy, Recorded: recorded(""), Now: t0,
				Observed: observed(func(o *Observed) { o.Ours, o.Tied, o.Succeeded = false, true, metav1.ConditionTrue })},
			want: Wait},
		{name: "another party's success named only after the node: no proof",
			in: Input{Policy: policy, Recorded: recorded(""), LossSince: t0.Add(-time.Second), Now: t0,
				Observed: observed(func(o *Observed) { o.Ours, o.Succeeded = false, metav1.ConditionTrue })},
			want: Wait, msg: "may be in another member"},
		{name: "a recorded remediation under a policy without one still ends",
			in:   Input{Recorded: recorded(""), Observed: observed(nil), Now: t0.Add(DefaultTimeout)},
			want: Fail, result: v1alpha1.RemediationTimedOut},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.in)
			if d.Action != c.want {
				t.Fatalf("action %q, want %q (%s)", d.Action, c.want, d.Message)
			}
			if c.result != "" && d.Result != c.result {
				t.Errorf("result %q, want %q", d.Result, c.result)
			}
			if !strings.Contains(d.Message, c.msg) {
				t.Errorf("message %q, want it to contain %q", d.Message, c.msg)
			}
			if c.requeue != 0 && d.RequeueAfter != c.requeue {
				t.Errorf("requeue %s, want %s", d.RequeueAfter, c.requeue)
			}
			if (d.Proof != "") != c.wantsProof {
				t.Errorf("proof %q, want one: %v", d.Proof, c.wantsProof)
			}
		})
	}
}

func TestReadSucceededAndOwner(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "lab.fedfailover.io/v1alpha1", "kind": "LabRemediation",
		"metadata": map[string]any{"name": "r", "namespace": "fence"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Processing", "status": "False"},
			map[string]any{"type": "Succeeded", "status": "True", "reason": "PoweredOff", "message": "off"}}}}}
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "failover.fedfailover.io/v1alpha1", Kind: "NodeRecovery", Name: "rec",
		UID: types.UID("rec-uid"), Controller: ptrTrue()}})
	o := Read(u, "rec-uid")
	if !o.Ours || o.Succeeded != metav1.ConditionTrue || o.Reason != "PoweredOff" {
		t.Fatalf("read %+v", o)
	}
	if Read(u, "other-record").Ours {
		t.Error("an object owned by another record is not this loss's")
	}
}

func TestStamp(t *testing.T) {
	tmpl := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "lab.fedfailover.io/v1alpha1", "kind": "LabRemediationTemplate",
		"metadata": map[string]any{"name": "power-off", "namespace": "fence"},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"team": "infra", contract.LabelRemediationNode: "forged"}},
			"spec":     map[string]any{"delay": "5s"}}}}}
	owner := metav1.OwnerReference{APIVersion: "failover.fedfailover.io/v1alpha1", Kind: "NodeRecovery", Name: "rec", UID: "rec-uid"}
	u, err := Stamp(tmpl, "m1.node-1.0123456789", Target{Cluster: "m1", Node: "node-1", NodeUID: "n-uid", Machine: "capi/node-1"}, owner)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetKind() != "LabRemediation" || u.GetNamespace() != "fence" || u.GetAPIVersion() != "lab.fedfailover.io/v1alpha1" {
		t.Errorf("stamped %s %s/%s", u.GetAPIVersion(), u.GetNamespace(), u.GetKind())
	}
	if d, _, _ := unstructured.NestedString(u.Object, "spec", "delay"); d != "5s" {
		t.Errorf("spec not stamped: %v", u.Object["spec"])
	}
	if l := u.GetLabels(); l["team"] != "infra" || l[contract.LabelRemediationNode] != "node-1" || l[contract.LabelManagedBy] != "fedfailover" {
		t.Errorf("labels %v: the template's kept, fedfailover's win", l)
	}
	if !AboutNode(u, "m1", "node-1") || AboutNode(u, "m2", "node-1") {
		t.Error("annotations must name the member and node")
	}
	if o := Read(u, "rec-uid"); !o.Ours {
		t.Error("the stamped object is owned by the record as controller")
	}
	tmpl.SetKind("LabRemediation")
	if _, err := Stamp(tmpl, "x", Target{}, owner); err == nil {
		t.Error("a kind without the Template suffix must be refused")
	}
}
