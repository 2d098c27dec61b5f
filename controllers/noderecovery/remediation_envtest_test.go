package noderecovery

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/remediation"
	"github.com/fedfailover/fedfailover/test/lab/fenceagent"
	"github.com/fedfailover/fedfailover/test/poll"
)

// Remediation through templates, through the same real API servers and
// member cache as the evidence-first tests: a node is lost without
// evidence (Ready=Unknown for notReadyFor 30 s, its Machine not being
// deleted), and the policy names a LabRemediationTemplate (the lab fence
// agent's API, whose CRDs the host serves). The test plays the fence agent
// by writing the remediation's Succeeded condition. Without the
// remediation code, such a node is only ever Blocked: every test below
// fails (no remediation object, no taint after a success).

// remWorld is one member with a policy naming a remediation template,
// one node to lose (k) and a healthy one.
type remWorld struct {
	*evidenceWorld
	k  *kubelet
	ns string // the host namespace of the template and the remediations
}

// remediationWorld makes the world; the template and the remediations are
// in the host namespace named after the member, or in ns when set (the
// Machines' namespace, for a remediation named after a Machine).
func (e *evidenceEnv) remediationWorld(t *testing.T, base, ns string) *remWorld {
	t.Helper()
	cluster := e.unique(base)
	e.join(t, cluster)
	ctx := context.Background()
	if ns == "" {
		ns = cluster
		must(t, e.host.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	must(t, e.host.Create(ctx, fenceagent.Template(ns, cluster, 5*time.Second, fenceagent.ModePowerOff)))
	e.policyFor(t, cluster, v1alpha1.NodeLossDetectionNotReady, func(s *v1alpha1.NodeRecoverySpec) {
		s.Remediation = &v1alpha1.RemediationSpec{Timeout: "1m", Template: v1alpha1.RemediationTemplateReference{
			APIVersion: fenceagent.GroupVersion.String(), Kind: fenceagent.TemplateGVK.Kind, Name: cluster, Namespace: ns}}
	})
	w := &remWorld{evidenceWorld: e.world(t, cluster), ns: ns}
	w.k = e.kubelet(t, cluster+"-n1")
	e.kubelet(t, cluster+"-n2") // one of two lost is within maxUnhealthy 50%
	e.machine(t, cluster, w.k.node.Name, false)
	w.seenByCache(w.k, true)
	return w
}

// silence plays the node lifecycle controller: the node's Ready
// condition turns Unknown, and the pass sees the loss begin.
func (w *remWorld) silence(k *kubelet) {
	w.t.Helper()
	n := k.live(w.t)
	n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
	n.Status.Conditions[0].LastTransitionTime = metav1.Now()
	must(w.t, w.e.member.Status().Update(context.Background(), n))
	w.passUntil("the loss of "+k.node.Name+" seen", func() error {
		w.r.sightings.mu.Lock()
		defer w.r.sightings.mu.Unlock()
		if w.r.sightings.m[w.cluster+"/"+k.node.Name].lossAt.IsZero() {
			return fmt.Errorf("not seen")
		}
		return nil
	})
}

// lose silences the node and lets notReadyFor pass on the test's clock.
func (w *remWorld) lose() {
	w.t.Helper()
	w.silence(w.k)
	w.advance(31 * time.Second)
}

// back plays the node's kubelet returning: Ready=True, a new transition.
func (w *remWorld) back() {
	w.t.Helper()
	n := w.k.live(w.t)
	n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionTrue, "KubeletReady"
	n.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Now().Add(time.Second).Truncate(time.Second))
	must(w.t, w.e.member.Status().Update(context.Background(), n))
}

// remediations lists the LabRemediations about the test's node: named
// after it, or annotated with its member (fedfailover's).
func (w *remWorld) remediations() []unstructured.Unstructured {
	w.t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(fenceagent.GroupVersion.WithKind("LabRemediationList"))
	must(w.t, w.e.host.List(context.Background(), list))
	var out []unstructured.Unstructured
	for _, u := range list.Items {
		if u.GetName() == w.k.node.Name || u.GetAnnotations()[contract.AnnotationRemediationCluster] == w.cluster {
			out = append(out, u)
		}
	}
	return out
}

// report plays the fence agent: it writes the Succeeded condition.
func (w *remWorld) report(u *unstructured.Unstructured, status, reason string) {
	w.t.Helper()
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(fenceagent.RemediationGVK)
	must(w.t, w.e.host.Get(context.Background(), client.ObjectKeyFromObject(u), cur))
	must(w.t, unstructured.SetNestedSlice(cur.Object, []any{map[string]any{"type": "Succeeded", "status": status, "reason": reason,
		"message": "test agent", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}, "status", "conditions"))
	must(w.t, w.e.host.Status().Update(context.Background(), cur))
}

// requested runs passes until exactly one remediation exists, and
// returns it.
func (w *remWorld) requested() *unstructured.Unstructured {
	w.t.Helper()
	var got []unstructured.Unstructured
	w.passUntil("a remediation requested", func() error {
		if got = w.remediations(); len(got) == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	if len(got) != 1 {
		w.t.Fatalf("%d remediations, want 1", len(got))
	}
	return &got[0]
}

// passes runs n passes that succeed, the clock advancing step before
// each (a pass that failed on a stale cache read is run again).
func (w *remWorld) passes(n int, step time.Duration) {
	w.t.Helper()
	for range n {
		w.advance(step)
		w.passUntil("a pass", func() error { return nil })
	}
}

// eventReasons drains the policy events the reconciler recorded.
func (w *remWorld) eventReasons() string {
	return drainEvents(w.r.recorder.(*events.FakeRecorder))
}

// TestRemediationRequestedOnceThenRecovers: the lost node gets one
// remediation, stamped from the template, owned by the loss's record and
// naming the member and node; passes while it runs neither duplicate it
// nor taint anything, and say what they wait for. Its Succeeded=True is
// the evidence: the live re-check passes and the node is tainted. When the
// node is back, the remediation is deleted with the record's close.
func TestRemediationRequestedOnceThenRecovers(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-ok", "")
	requested := metrics.NodeRemediations.WithLabelValues(w.cluster, metrics.RemediationRequested)
	w.lose()
	u := w.requested()
	rec := w.record(w.k.node.Name)
	if rec == nil || rec.Status.Remediation == nil || rec.Status.Remediation.Name != u.GetName() || rec.Status.Remediation.Foreign {
		t.Fatalf("record %+v, want it to name remediation %s as its own", rec, u.GetName())
	}
	if o := remediation.Read(u, string(rec.UID)); !o.Ours || u.GetName() != rec.Name {
		t.Fatalf("remediation %s not owned by record %s (%s)", u.GetName(), rec.Name, rec.UID)
	}
	if a := u.GetAnnotations(); a[contract.AnnotationRemediationCluster] != w.cluster || a[contract.AnnotationRemediationNode] != w.k.node.Name ||
		a[contract.AnnotationRemediationNodeUID] != string(w.k.node.UID) || a[contract.AnnotationRemediationMachine] != "capi/"+w.k.node.Name {
		t.Fatalf("annotations %v", a)
	}
	if d, _, _ := unstructured.NestedString(u.Object, "spec", "delay"); d != "5s" {
		t.Fatalf("spec %v, want the template's", u.Object["spec"])
	}
	w.passes(5, 5*time.Second)
	if n := len(w.remediations()); n != 1 || tainted(w.k.live(t)) {
		t.Fatalf("while the remediation runs: %d remediations, tainted %v; want 1 and no taint", n, tainted(w.k.live(t)))
	}
	rec = w.record(w.k.node.Name)
	want := "waiting for remediation LabRemediation " + w.ns + "/" + u.GetName() + " since "
	if rec.Status.Phase != v1alpha1.RecoveryPhaseRemediating || !strings.Contains(rec.Status.Message, want) {
		t.Fatalf("record %s %q, want Remediating %q", rec.Status.Phase, rec.Status.Message, want)
	}
	reps, _ := w.r.store.reports.Snapshot(w.cluster)
	if rs := reps[w.cluster].Recoveries; len(rs) != 1 || rs[0].Phase != v1alpha1.RecoveryPhaseRemediating ||
		rs[0].Remediation != "LabRemediation "+w.ns+"/"+u.GetName() {
		t.Fatalf("status recoveries %+v", rs)
	}
	if got := testutil.ToFloat64(requested); got != 1 {
		t.Errorf("%s requested counted %v times, want 1", w.cluster, got)
	}
	if evs := w.eventReasons(); strings.Count(evs, ReasonRemediationRequested) != 1 {
		t.Errorf("events %q, want one %s", evs, ReasonRemediationRequested)
	}

	w.report(u, "True", "PoweredOff")
	w.passUntil("the taint", func() error {
		if !tainted(w.k.live(t)) {
			return fmt.Errorf("not tainted")
		}
		return nil
	})
	rec = w.record(w.k.node.Name)
	if rec.Status.Evidence != "RemediationSucceeded" || rec.Status.Remediation.Result != v1alpha1.RemediationSucceeded {
		t.Fatalf("record %+v, want evidence RemediationSucceeded and the result recorded", rec.Status)
	}

	w.back()
	w.passUntil("the remediation deleted and the taint removed", func() error {
		if n := len(w.remediations()); n != 0 || tainted(w.k.live(t)) {
			return fmt.Errorf("%d remediations, tainted %v", n, tainted(w.k.live(t)))
		}
		return nil
	})
	if rec := w.record(w.k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseFinished || !strings.Contains(rec.Status.Message, "remediation LabRemediation") {
		t.Fatalf("record %+v, want finished, naming the deleted remediation", rec.Status)
	}
}

// TestRemediationFailedIsBlocked: Succeeded=False leaves the recovery
// Blocked with the agent's reason, for the rest of the loss: nothing is
// tainted, no other remediation is requested, a later success is not taken.
func TestRemediationFailedIsBlocked(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-fail", "")
	w.lose()
	u := w.requested()
	w.report(u, "False", "AgentFailed")
	w.passUntil("Blocked", func() error {
		if rec := w.record(w.k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseBlocked {
			return fmt.Errorf("phase %s", rec.Status.Phase)
		}
		return nil
	})
	rec := w.record(w.k.node.Name)
	if !strings.Contains(rec.Status.Message, "failed: Succeeded=False, reason AgentFailed") || rec.Status.Remediation.Result != v1alpha1.RemediationFailed {
		t.Fatalf("record %+v", rec.Status)
	}
	w.report(u, "True", "LateSuccess")
	w.passes(5, 10*time.Second)
	if n := len(w.remediations()); n != 1 || tainted(w.k.live(t)) {
		t.Fatalf("after the failure: %d remediations, tainted %v; want 1 and no taint", n, tainted(w.k.live(t)))
	}
	if evs := w.eventReasons(); !strings.Contains(evs, ReasonRemediationFailed) {
		t.Errorf("events %q, want %s", evs, ReasonRemediationFailed)
	}
	if got := testutil.ToFloat64(metrics.NodeRemediations.WithLabelValues(w.cluster, metrics.RemediationFailed)); got != 1 {
		t.Errorf("failed counted %v times, want 1", got)
	}
}

// TestRemediationTimeoutIsBlocked: no success within the timeout (1m on
// the test's clock): Blocked, reason timed out, nothing destructive.
func TestRemediationTimeoutIsBlocked(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-timeout", "")
	w.lose()
	w.requested()
	w.passes(1, 59*time.Second)
	if rec := w.record(w.k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseRemediating {
		t.Fatalf("timed out early: %+v", rec.Status)
	}
	w.passes(1, 2*time.Second)
	rec := w.record(w.k.node.Name)
	if rec.Status.Phase != v1alpha1.RecoveryPhaseBlocked || rec.Status.Remediation.Result != v1alpha1.RemediationTimedOut ||
		!strings.Contains(rec.Status.Message, "timed out: no success within 1m0s") {
		t.Fatalf("record %+v, want Blocked, timed out", rec.Status)
	}
	w.passes(3, 10*time.Second)
	if n := len(w.remediations()); n != 1 || tainted(w.k.live(t)) {
		t.Fatalf("after the timeout: %d remediations, tainted %v", n, tainted(w.k.live(t)))
	}
}

// TestRemediationNotRequestedInStorm: the storm guard comes before a
// remediation is requested: with both nodes lost (maxUnhealthy 50%), none
// is.
func TestRemediationNotRequestedInStorm(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-storm", "")
	other := &kubelet{e: e, node: &corev1.Node{}}
	must(t, e.member.Get(context.Background(), client.ObjectKey{Name: w.cluster + "-n2"}, other.node))
	w.silence(other)
	w.lose()
	w.passes(4, 5*time.Second)
	if n := len(w.remediations()); n != 0 {
		t.Fatalf("%d remediations in a storm, want none", n)
	}
	if rec := w.record(w.k.node.Name); rec != nil && rec.Status.Phase != v1alpha1.RecoveryPhaseSuspended {
		t.Fatalf("record %+v, want none or Suspended", rec.Status)
	}
}

// TestRemediationNotRequestedWhilePausedOrInDryRun: pause and dry run come
// before a remediation is requested: paused, nothing; in dry run, an event
// says what would be requested, and nothing is.
func TestRemediationNotRequestedWhilePausedOrInDryRun(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-paused", "")
	setPolicy := func(mut func(*v1alpha1.FailoverPolicySpec), seen func(*v1alpha1.FailoverPolicySpec) bool) {
		must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
			pol := &v1alpha1.FailoverPolicy{}
			if err := e.host.Get(context.Background(), client.ObjectKey{Name: w.cluster}, pol); err != nil {
				return err
			}
			mut(&pol.Spec)
			return e.host.Update(context.Background(), pol)
		}))
		w.passUntil("the policy change seen", func() error {
			v, err := w.r.load(context.Background(), w.cluster)
			if err != nil || v.policy == nil || !seen(&v.policy.Spec) {
				return fmt.Errorf("not yet (%w)", err)
			}
			return nil
		})
	}
	setPolicy(func(s *v1alpha1.FailoverPolicySpec) { s.Paused = true }, func(s *v1alpha1.FailoverPolicySpec) bool { return s.Paused })
	w.lose()
	w.passes(4, 5*time.Second)
	if n := len(w.remediations()); n != 0 {
		t.Fatalf("%d remediations while paused, want none", n)
	}
	setPolicy(func(s *v1alpha1.FailoverPolicySpec) { s.Paused, s.DryRun = false, true },
		func(s *v1alpha1.FailoverPolicySpec) bool { return !s.Paused && s.DryRun })
	w.passes(4, 5*time.Second)
	if n := len(w.remediations()); n != 0 {
		t.Fatalf("%d remediations in dry run, want none", n)
	}
	if evs := w.eventReasons(); strings.Count(evs, ReasonWouldRemediate) != 1 {
		t.Fatalf("events %q, want one %s", evs, ReasonWouldRemediate)
	}
}

// TestRemediationForeignWaitedFor: another party's remediation for the
// node (named after its Machine, in the Machine's namespace, as Cluster
// API's external remediation names one), created after
// the loss began, is recorded and waited for: no second one is created, its
// success is the evidence, and fedfailover never deletes it.
func TestRemediationForeignWaitedFor(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-foreign", "capi")
	w.silence(w.k)
	foreign := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"mode": "PowerOff"}}}
	foreign.SetGroupVersionKind(fenceagent.RemediationGVK)
	foreign.SetNamespace(w.ns)
	foreign.SetName(w.k.node.Name) // the Machine's name (and the node's)
	must(t, e.host.Create(context.Background(), foreign))
	w.advance(31 * time.Second)
	w.passUntil("the foreign remediation adopted", func() error {
		if rec := w.record(w.k.node.Name); rec == nil || rec.Status.Remediation == nil {
			return fmt.Errorf("not recorded yet")
		}
		return nil
	})
	rec := w.record(w.k.node.Name)
	if rr := rec.Status.Remediation; !rr.Foreign || rr.Name != w.k.node.Name || rec.Status.Phase != v1alpha1.RecoveryPhaseRemediating {
		t.Fatalf("record %+v, want the foreign remediation waited for", rec.Status)
	}
	w.passes(3, 5*time.Second)
	if n := len(w.remediations()); n != 1 {
		t.Fatalf("%d remediations, want only the foreign one", n)
	}
	w.report(foreign, "True", "Fenced")
	w.passUntil("the taint", func() error {
		if !tainted(w.k.live(t)) {
			return fmt.Errorf("not tainted")
		}
		return nil
	})
	w.back()
	w.passUntil("the record closed", func() error {
		if rec := w.record(w.k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseFinished {
			return fmt.Errorf("phase %s", rec.Status.Phase)
		}
		return nil
	})
	if n := len(w.remediations()); n != 1 {
		t.Fatalf("fedfailover deleted another party's remediation: %d left", n)
	}
}

// TestRemediationNodeBackBeforeSuccess: the node returns while its
// remediation runs: the remediation is deleted, nothing was tainted.
func TestRemediationNodeBackBeforeSuccess(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-back", "")
	w.lose()
	w.requested()
	w.back()
	w.passUntil("the remediation deleted", func() error {
		if n := len(w.remediations()); n != 0 {
			return fmt.Errorf("%d remediations", n)
		}
		return nil
	})
	if tainted(w.k.live(t)) {
		t.Fatal("tainted")
	}
	if rec := w.record(w.k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseFinished || rec.Status.FinishReason != v1alpha1.FinishNodeReturned {
		t.Fatalf("record %+v", rec.Status)
	}
}

// TestRemediationSuccessReadLiveBeforeTheTaint: the pass decides on the
// remediation's success, and the remediation is deleted right before the
// act's live re-check: the re-check reads it gone, and nothing is tainted.
// A record or a cached success never stands in for the live read.
func TestRemediationSuccessReadLiveBeforeTheTaint(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-live", "")
	w.lose()
	u := w.requested()
	w.passes(1, time.Second) // the request's own live Node read is behind us
	w.report(u, "True", "PoweredOff")
	w.members.mu.Lock()
	w.members.beforeLiveNode = func(string) {
		must(t, e.host.Delete(context.Background(), u.DeepCopy()))
	}
	w.members.mu.Unlock()
	w.passUntil("the act refused", func() error {
		if rec := w.record(w.k.node.Name); rec.Status.Phase != v1alpha1.RecoveryPhaseBlocked {
			return fmt.Errorf("phase %s: %s", rec.Status.Phase, rec.Status.Message)
		}
		return nil
	})
	w.passes(3, 5*time.Second)
	if n := w.k.live(t); tainted(n) {
		t.Fatal("tainted on a remediation success that was gone at the live re-check")
	}
	if rec := w.record(w.k.node.Name); rec.Status.IntentAt != nil || rec.Status.Phase != v1alpha1.RecoveryPhaseBlocked {
		t.Fatalf("record %+v, want Blocked with no intent", rec.Status)
	}
	if n := len(w.remediations()); n != 0 {
		t.Fatalf("%d remediations: a second one was requested for the same loss", n)
	}
}

// TestRemediationNotRequestedWhileTheMemberCannotBeRead: the member's API
// server cannot be read live (its cache still answers): the live check
// before the request fails, and no remediation is requested until the
// member answers again.
func TestRemediationNotRequestedWhileTheMemberCannotBeRead(t *testing.T) {
	e := startEvidenceEnv(t)
	w := e.remediationWorld(t, "rem-unreachable", "")
	w.members.mu.Lock()
	w.members.liveErr = fmt.Errorf("dial tcp: connect: connection refused")
	w.members.mu.Unlock()
	w.lose()
	for range 3 {
		w.advance(5 * time.Second)
		// A pass that lost a race on the policy (its finalizer patched over
		// a cached copy another writer changed) is retried, as the
		// controller's queue would.
		var err error
		poll.T(t, 30*time.Second, 100*time.Millisecond, "a pass past write conflicts", func(context.Context) (bool, string, error) {
			err = w.pass()
			return !apierrors.IsConflict(err), fmt.Sprint(err), nil
		})
		if err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("pass: %v, want the live read's error", err)
		}
	}
	if n := len(w.remediations()); n != 0 {
		t.Fatalf("%d remediations while the member cannot be read, want none", n)
	}
	w.members.mu.Lock()
	w.members.liveErr = nil
	w.members.mu.Unlock()
	w.requested()
}
