package rebalance

import (
	"context"
	"fmt"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/scheme"
)

// A pass reads the policies from the manager's cache without their status
// (an entry per RSP, deep-copied in every pass before: a tenth of the
// manager's CPU at the goal size), and what it gets shares nothing with
// the cache: what a pass does to it never reaches the cache's object.
func TestPolicyForTakesNoStatusAndSharesNothing(t *testing.T) {
	r, c, _, ns := onHost(t, rebalancing("pf-nostatus", nil))
	ctx := context.Background()
	key := client.ObjectKey{Name: "pf-nostatus"}
	pol := &v1alpha1.FailoverPolicy{}
	if err := c.Get(ctx, key, pol); err != nil {
		t.Fatal(err)
	}
	pol.Status.FailoverReadiness = []v1alpha1.RSPReadiness{{Namespace: ns, Name: "web", TotalReplicas: 6}}
	if err := c.Status().Update(ctx, pol); err != nil {
		t.Fatal(err)
	}
	rsp := userRSP(t, c, ns)

	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(hostCfg, ctrl.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	runManager(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the manager's cache did not sync")
	}
	r.host = mgr.GetClient()
	cached := func() *v1alpha1.FailoverPolicy {
		got := &v1alpha1.FailoverPolicy{}
		if err := mgr.GetClient().Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	pollUntil(t, 30*time.Second, "the cache holds the policy's status", func() (bool, string) {
		got := cached()
		return len(got.Status.FailoverReadiness) == 1, fmt.Sprintf("status %+v", got.Status)
	})

	sel, err := r.policyFor(ctx, rsp)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Governing == nil || sel.Governing.Name != key.Name {
		t.Fatalf("governing policy %v, want %s", sel.Governing, key.Name)
	}
	if got := sel.Governing.Status.FailoverReadiness; len(got) != 0 {
		t.Errorf("the pass's policy carries its status: %+v", got)
	}
	if len(sel.Governing.ManagedFields) != 0 {
		t.Errorf("the pass's policy carries %d managed fields entries", len(sel.Governing.ManagedFields))
	}
	sel.Governing.Spec.Rebalance.Failback.MaxStep = 99
	sel.Governing.Labels = map[string]string{"changed": "by-the-pass"}
	after := cached()
	if after.Spec.Rebalance.Failback.MaxStep == 99 || after.Labels["changed"] != "" {
		t.Errorf("the pass's changes reached the cache: spec %+v, labels %v", after.Spec.Rebalance.Failback, after.Labels)
	}
	if len(after.Status.FailoverReadiness) != 1 {
		t.Errorf("the cache's policy lost its status: %+v", after.Status)
	}
}
