package rebalance

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// shiftedOnHost is the user's RSP pinned from 1:1 to 6:0 by policy pol, written
// the way the controller writes it (server-side apply, its field manager).
func shiftedOnHost(t *testing.T, r *Reconciler, c client.Client, ns, pol string) (types.NamespacedName, contract.Placement) {
	t.Helper()
	rsp := userRSP(t, c, ns)
	user := specPlacement(rsp)
	six, zero := int64(6), int64(0)
	shifted := contract.Placement{TotalReplicas: 6, Clusters: map[string]fedschedv1a1.ClusterPreferences{
		"member1": {MinReplicas: 6, MaxReplicas: &six, Weight: 6}, "member2": {MaxReplicas: &zero}}}
	m := &contract.RebalanceState{Policy: pol, Baseline: user, Applied: &shifted, LastChange: timePtr(t0)}
	key := client.ObjectKeyFromObject(rsp)
	putRecord(t, c, key, m)
	if err := r.applyRSP(context.Background(), rsp, shifted); err != nil {
		t.Fatal(err)
	}
	if got := specPlacement(specOf(t, c, key)); !got.Equal(shifted) {
		t.Fatalf("setup: spec %+v, want the shift", got)
	}
	return key, user
}

func reconcileFinalizer(t *testing.T, r *Reconciler, name string) {
	t.Helper()
	if _, err := (&finalizer{r: r}).Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

// wantReleased fails unless the RSP is back at baseline, without
// fedfailover's annotation, and its record says released.
func wantReleased(t *testing.T, c client.Client, key types.NamespacedName, baseline contract.Placement) {
	t.Helper()
	got := specOf(t, c, key)
	if !specPlacement(got).Equal(baseline) {
		t.Errorf("spec %+v, want the baseline %+v", got.Spec, baseline)
	}
	if v, ok := got.Annotations[contract.AnnotationRebalance]; ok {
		t.Errorf("annotation left: %s", v)
	}
	if rec := recordOf(t, c, key); !rec.Spec.Released || rec.Spec.Policy != "" {
		t.Errorf("record %+v, want it released", rec.Spec)
	}
}

func rebalancing(name string, mutate func(*v1alpha1.FailoverPolicy)) *v1alpha1.FailoverPolicy {
	spec := testSpec()
	pol := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &spec}}
	if mutate != nil {
		mutate(pol)
	}
	return pol
}

// wantHandedOver fails unless the RSP's record says its release is on,
// with the policy's maxStep: the finalizer's part.
func wantHandedOver(t *testing.T, c client.Client, key types.NamespacedName, maxStep int32) {
	t.Helper()
	if rel := recordOf(t, c, key).Spec.Release; rel == nil || rel.MaxStep != maxStep {
		t.Fatalf("record's release %+v, want it on with maxStep %d", rel, maxStep)
	}
}

// Rule 7: a policy with rebalancing on gets the finalizer; a policy deleted
// mid-failover hands the release of each shifted RSP over to its record
// and goes, leaving other finalizers; the RSP's next pass gives its
// baseline back (no members to wait for here).
func TestDeletedPolicyRestoresBaselines(t *testing.T) {
	pol := rebalancing("fin-delete", func(p *v1alpha1.FailoverPolicy) { p.Finalizers = []string{"other.example/keep"} })
	r, c, _, ns := onHost(t, pol)
	key, baseline := shiftedOnHost(t, r, c, ns, pol.Name)
	reconcileFinalizer(t, r, pol.Name)
	if !hasFinalizer(t, c, pol.Name, contract.FinalizerRebalance) {
		t.Fatalf("no %s on a policy with rebalancing on", contract.FinalizerRebalance)
	}
	if err := c.Delete(context.Background(), pol); err != nil {
		t.Fatal(err)
	}
	reconcileFinalizer(t, r, pol.Name)
	wantHandedOver(t, c, key, pol.Spec.Rebalance.Failback.MaxStep)
	if hasFinalizer(t, c, pol.Name, contract.FinalizerRebalance) || !hasFinalizer(t, c, pol.Name, "other.example/keep") {
		t.Error("want fedfailover's finalizer removed and the other one kept")
	}
	passAt(t, r, key, t0)
	wantReleased(t, c, key, baseline)
}

// Rule 7: rebalancing turned off mid-failover: release handed over,
// finalizer gone, baselines back.
func TestDisabledPolicyRestoresBaselines(t *testing.T) {
	pol := rebalancing("fin-disable", func(p *v1alpha1.FailoverPolicy) { p.Finalizers = []string{contract.FinalizerRebalance} })
	r, c, _, ns := onHost(t, pol)
	key, baseline := shiftedOnHost(t, r, c, ns, pol.Name)
	orig := pol.DeepCopy()
	pol.Spec.Rebalance.Enabled = ptr.To(false)
	if err := c.Patch(context.Background(), pol, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	reconcileFinalizer(t, r, pol.Name)
	wantHandedOver(t, c, key, pol.Spec.Rebalance.Failback.MaxStep)
	if hasFinalizer(t, c, pol.Name, contract.FinalizerRebalance) {
		t.Error("finalizer kept on a policy with rebalancing off")
	}
	passAt(t, r, key, t0)
	wantReleased(t, c, key, baseline)
	if rec := recordOf(t, c, key); rec.Spec.Release != nil {
		t.Errorf("released record still says a release is on: %+v", rec.Spec.Release)
	}
}

// Rule 7: a deleted policy with nothing left to restore goes at once.
func TestDeletedPolicyWithoutRSPsGoes(t *testing.T) {
	pol := rebalancing("fin-empty", func(p *v1alpha1.FailoverPolicy) { p.Finalizers = []string{contract.FinalizerRebalance} })
	r, c, _, _ := onHost(t, pol)
	if err := c.Delete(context.Background(), pol); err != nil {
		t.Fatal(err)
	}
	reconcileFinalizer(t, r, pol.Name)
	if err := c.Get(context.Background(), client.ObjectKey{Name: pol.Name}, &v1alpha1.FailoverPolicy{}); !apierrors.IsNotFound(err) {
		t.Errorf("policy still there (%v)", err)
	}
}

// Rule 7: dryRun switched on mid-failover: the RSP is left as it is,
// nothing new is written, and the Rebalancing condition says so.
func TestDryRunMidFailoverLeavesRSP(t *testing.T) {
	pol := rebalancing("fin-dry", func(p *v1alpha1.FailoverPolicy) { p.Spec.DryRun = true })
	r, c, _, ns := onHost(t, pol)
	key, _ := shiftedOnHost(t, r, c, ns, pol.Name)
	fm := noMembers(t)
	fm.add(t, "member1", readyNode("n1", 10))
	fm.add(t, "member2", readyNode("n2", 10)) // both healthy: the plan is a failback
	r.members = fm
	before := specOf(t, c, key)
	for i := range 3 {
		passAt(t, r, key, t0.Add(time.Duration(i)*time.Minute))
	}
	if after := specOf(t, c, key); after.ResourceVersion != before.ResourceVersion {
		t.Errorf("RSP written in dry run: %+v", after.Spec)
	}
	entries, _ := r.store.Snapshot(pol.Name)
	cond := meta.FindStatusCondition(desiredStatus(pol, entries).Conditions, v1alpha1.ConditionRebalancing)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "dry run: nothing written") {
		t.Errorf("Rebalancing %+v, want True saying the dry run leaves the RSP as it is", cond)
	}
}
