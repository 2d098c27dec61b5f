//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/controllers/rebalance"
	"github.com/fedfailover/fedfailover/internal/planner"
	"github.com/fedfailover/fedfailover/test/lab"
)

// pinned matches a pinned member in rspString's form.
var pinned = regexp.MustCompile(`max[0-9]`)

// Predictive placement: the user scales a workload up while both members
// have room (nothing is capped: no false cap), then member2 is filled by
// another workload and the user scales up again. fedfailover caps member2
// at what it runs from its capacity estimate, at once:
// capacityExhaustedAfter is 5 minutes here, so a shift within the test can
// only be the predictive one. No replica ever runs on member2 beyond what
// it held, and every replica is Ready.
func TestRebalancePredictiveScaleUpIntoAFullMember(t *testing.T) {
	const ns, name = "rebalance-predictive", "web"
	startRebalance(t)
	pol := rbPolicy(t, "rebalance-predictive", ns, func(s *v1alpha1.RebalanceSpec) {
		s.Placement = v1alpha1.PlacementPredictive
		s.CapacityExhaustedAfter = "5m"
	})
	federatedWorkload(t, ns, name, 4)
	eventually(t, 90*time.Second, "split 2/2, Ready", func(ctx context.Context) (bool, string) { return split(ctx, ns, name, 2, 2) })

	rec := recordRSP(t, ns, name)
	scaleRSP(t, ns, name, 6)
	eventually(t, 90*time.Second, "room on both: split 3/3, Ready", func(ctx context.Context) (bool, string) { return split(ctx, ns, name, 3, 3) })
	for _, s := range rec.stop() {
		if pinned.MatchString(s.spec) {
			t.Fatalf("false cap: the RSP was pinned (%s) while both members had room", s.spec)
		}
	}

	if err := theLab.ExhaustCapacity(t.Context(), "member2", lab.ExhaustFill); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := theLab.RestoreCapacity(context.Background(), "member2"); err != nil {
			t.Errorf("restore capacity: %v", err)
		}
	})
	edited := time.Now()
	scaleRSP(t, ns, name, 10)
	most := int32(0)
	eventually(t, 60*time.Second, "member2 capped at its 3, member1 runs 7, all Ready", func(ctx context.Context) (bool, string) {
		if _, r2, err := memberReplicas(ctx, "member2", ns, name); err == nil {
			most = max(most, r2)
		}
		r, err := getRSP(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if !pinnedTo(r, "member2", 3) || !pinnedTo(r, "member1", 7) {
			return false, rspString(r)
		}
		return split(ctx, ns, name, 7, 3)
	})
	took := time.Since(edited)
	rebalanceResult(t, "predictive scale-up into a full member", took)
	if most > 3 {
		t.Errorf("member2, full, ran %d Ready replicas; want at most the 3 it held", most)
	}
	eventually(t, 30*time.Second, "the decision CapacityPredicted in the policy's status", func(ctx context.Context) (bool, string) {
		p, err := getPolicy(ctx, pol.Name)
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(p.Status.RecentDecisions, func(d v1alpha1.Decision) bool {
			return d.Action == rebalance.ActionShift && d.Reason == planner.ReasonCapacityPredicted && d.Object == "ReplicaSchedulingPreference/"+ns+"/"+name
		}), fmt.Sprintf("decisions %+v", p.Status.RecentDecisions)
	})
}

// scaleRSP is the user's edit of the RSP's totalReplicas.
func scaleRSP(t *testing.T, ns, name string, total int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := getRSP(t.Context(), ns, name)
		if err != nil {
			return err
		}
		patch := client.MergeFrom(r.DeepCopy())
		r.Spec.TotalReplicas = total
		return nrHostCl.Patch(t.Context(), r, patch)
	})
	if err != nil {
		t.Fatal(err)
	}
}
