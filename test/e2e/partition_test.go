//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/planner"
)

// partitionWindow is how long a fedfailover-only partition is watched: well
// past clusterFailedAfter (10 s in rbSpec), the member teardown and the
// rebalance resync, so a shift would have been written by then.
const partitionWindow = 2 * time.Minute

// partitionSetup runs the real manager in its own network namespace and a
// 6-replica workload split 3/3 and Ready, managed by a policy.
func partitionSetup(t *testing.T, ns string) (*isolatedManager, string) {
	t.Helper()
	const name, total = "web", 6
	mgr := startIsolatedManager(t)
	pol := rbPolicy(t, ns, ns, nil)
	federatedWorkload(t, ns, name, total)
	mgr.waitMembersConnected(pol.Name, "member1", "member2")
	eventually(t, 90*time.Second, "replicas split 3/3 and Ready", func(ctx context.Context) (bool, string) {
		return split(ctx, ns, name, total/2, total/2)
	})
	eventually(t, 30*time.Second, "6 pods Ready", func(ctx context.Context) (bool, string) {
		n, ok := readyPods(ctx, ns, name)
		return ok && n == total, fmt.Sprintf("%d Ready (read ok %v)", n, ok)
	})
	return mgr, pol.Name
}

// runningNeverBelow watches the workload's Ready pods every second for the
// window and fails as soon as they drop below want. A failed read of the
// test's own (uncut) connection to a member fails the test too: it would
// hide a drop. also runs after each check, for what the test records.
func runningNeverBelow(t *testing.T, mgr *isolatedManager, ns, name string, want int32, also func(ctx context.Context)) {
	t.Helper()
	holds(t, partitionWindow, fmt.Sprintf("at least %d Running replicas", want), func(ctx context.Context) (bool, string) {
		if ok, why := mgr.running(); !ok {
			return false, why
		}
		n, ok := readyPods(ctx, ns, name)
		if !ok {
			return false, "a member could not be read"
		}
		if also != nil {
			also(ctx)
		}
		return n >= want, fmt.Sprintf("%d Running and Ready", n)
	})
}

// guardShown reports whether the policy's status says the federation guard
// holds the RSP: a RebalanceSuspended condition True with reason
// TooManyMembersFailed, or the reason in the Rebalancing condition or in
// the RSP's entry of status.rebalances.
func guardShown(p *v1alpha1.FailoverPolicy, ns, name string) bool {
	if c := meta.FindStatusCondition(p.Status.Conditions, "RebalanceSuspended"); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == planner.ReasonTooManyMembersFailed {
		return true
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRebalancing); c != nil &&
		(c.Reason == planner.ReasonTooManyMembersFailed || strings.Contains(c.Message, planner.ReasonTooManyMembersFailed)) {
		return true
	}
	return slices.ContainsFunc(p.Status.Rebalances, func(s v1alpha1.RebalanceStatus) bool {
		return s.Namespace == ns && s.Name == name && s.Reason == planner.ReasonTooManyMembersFailed
	})
}

// Only fedfailover loses both members; kubefed keeps seeing them Ready.
// Before the federation guard this pinned every member to maxReplicas 0 and
// the workload went from 6 to 0 Running replicas. Now nothing may move: the
// Running replicas never drop, the RSP stays the user's, and the policy
// says why.
func TestPartitionBothMembersFromFedfailoverOnly(t *testing.T) {
	const ns, name, total = "partition-both", "web", 6
	mgr, pol := partitionSetup(t, ns)
	cut := time.Now()
	mgr.cut("member1")
	mgr.cut("member2")
	var guardAt time.Duration
	runningNeverBelow(t, mgr, ns, name, total, func(ctx context.Context) {
		if guardAt > 0 {
			return
		}
		if p, err := getPolicy(ctx, pol); err == nil && guardShown(p, ns, name) {
			guardAt = time.Since(cut)
		}
	})
	if guardAt == 0 {
		p, err := getPolicy(t.Context(), pol)
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("the guard never showed in the policy status within %s: conditions %+v, rebalances %+v",
			partitionWindow, p.Status.Conditions, p.Status.Rebalances)
	}
	t.Logf("guard shown %.1fs after the cut", guardAt.Seconds())
	r, err := getRSP(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if !hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1}) {
		t.Errorf("RSP %s, want the user's weights 1/1 untouched", rspString(r))
	}
}

// Only fedfailover loses member2; kubefed still reaches it. fedfailover may
// move replicas off it only as far as member1 runs them: no replica is lost
// at any second.
func TestPartitionOneMemberFromFedfailoverOnly(t *testing.T) {
	const ns, name, total = "partition-one", "web", 6
	mgr, pol := partitionSetup(t, ns)
	mgr.cut("member2")
	var placements []string
	last := ""
	runningNeverBelow(t, mgr, ns, name, total, func(ctx context.Context) {
		if r, err := getRSP(ctx, ns, name); err == nil && rspString(r) != last {
			last = rspString(r)
			placements = append(placements, last)
		}
	})
	t.Logf("RSP during the partition: %v", placements)
	// A move off member2 must say that only fedfailover sees it failed.
	p, err := getPolicy(t.Context(), pol)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range p.Status.RecentDecisions {
		if d.Object == "ReplicaSchedulingPreference/"+ns+"/"+name && d.Reason == planner.ReasonMemberFailed {
			t.Errorf("decision %+v: reason MemberFailed for a member kubefed reports Ready, want %s", d, planner.ReasonMemberUnreachable)
		}
	}
}
