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

// heldShown reports whether the policy's status says a safety rule holds
// the RSP for reason: a RebalanceSuspended condition True with that reason
// naming the RSP, or the reason in the RSP's entry of status.rebalances.
func heldShown(p *v1alpha1.FailoverPolicy, ns, name, reason string) bool {
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionRebalanceSuspended); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == reason && strings.Contains(c.Message, ns+"/"+name) {
		return true
	}
	return slices.ContainsFunc(p.Status.Rebalances, func(s v1alpha1.RebalanceStatus) bool {
		return s.Namespace == ns && s.Name == name && s.Reason == reason
	})
}

// userWeights: the RSP as the user wrote it, 1/1 over 6 replicas.
func userWeights(ctx context.Context, ns, name string, total int32) (bool, string) {
	r, err := getRSP(ctx, ns, name)
	if err != nil {
		return false, err.Error()
	}
	return hasWeightsOnly(r, total, map[string]int64{"member1": 1, "member2": 1}), rspString(r)
}

// Only fedfailover loses both members; kubefed keeps seeing them Ready.
// Before the federation guard this pinned every member to maxReplicas 0 and
// the workload went from 6 to 0 Running replicas. Now nothing may move
// (safety rule 3: neither member is failed while kubefed reports it
// Ready): the Running replicas never drop, the RSP stays the user's at
// every second, and the policy says why.
func TestPartitionBothMembersFromFedfailoverOnly(t *testing.T) {
	const ns, name, total = "partition-both", "web", 6
	mgr, pol := partitionSetup(t, ns)
	cut := time.Now()
	mgr.cut("member1")
	mgr.cut("member2")
	var shownAt time.Duration
	var moved string
	runningNeverBelow(t, mgr, ns, name, total, func(ctx context.Context) {
		if ok, rsp := userWeights(ctx, ns, name, total); !ok && moved == "" {
			moved = fmt.Sprintf("%.1fs after the cut: %s", time.Since(cut).Seconds(), rsp)
		}
		if shownAt > 0 {
			return
		}
		if p, err := getPolicy(ctx, pol); err == nil && heldShown(p, ns, name, v1alpha1.ReasonMemberFailureUnconfirmed) {
			shownAt = time.Since(cut)
		}
	})
	if moved != "" {
		t.Errorf("the RSP left the user's weights 1/1: %s", moved)
	}
	if shownAt == 0 {
		p, err := getPolicy(t.Context(), pol)
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("the policy status never said %s within %s: conditions %+v, rebalances %+v",
			v1alpha1.ReasonMemberFailureUnconfirmed, partitionWindow, p.Status.Conditions, p.Status.Rebalances)
	}
	t.Logf("%s shown %.1fs after the cut", v1alpha1.ReasonMemberFailureUnconfirmed, shownAt.Seconds())
}

// Only fedfailover loses member2; kubefed still reaches it and reports it
// Ready. fedfailover moves nothing (safety rule 3, no false failover): the
// RSP keeps the user's weights at every second of the window, no replica
// is lost, no decision shifts the RSP, and the policy's RebalanceSuspended
// condition says member2's failure is unconfirmed. Before, member2's
// replicas were moved to member1 (make before break) clusterFailedAfter
// after the cut.
func TestPartitionOneMemberFromFedfailoverOnly(t *testing.T) {
	const ns, name, total = "partition-one", "web", 6
	mgr, pol := partitionSetup(t, ns)
	cut := time.Now()
	mgr.cut("member2")
	var shownAt time.Duration
	var moved string
	runningNeverBelow(t, mgr, ns, name, total, func(ctx context.Context) {
		if ok, rsp := userWeights(ctx, ns, name, total); !ok && moved == "" {
			moved = fmt.Sprintf("%.1fs after the cut: %s", time.Since(cut).Seconds(), rsp)
		}
		if shownAt > 0 {
			return
		}
		if p, err := getPolicy(ctx, pol); err == nil && heldShown(p, ns, name, v1alpha1.ReasonMemberFailureUnconfirmed) {
			shownAt = time.Since(cut)
		}
	})
	if moved != "" {
		t.Errorf("the RSP left the user's weights 1/1 for a member kubefed reports Ready: %s", moved)
	}
	p, err := getPolicy(t.Context(), pol)
	if err != nil {
		t.Fatal(err)
	}
	if shownAt == 0 {
		t.Errorf("the policy status never said %s within %s: conditions %+v",
			v1alpha1.ReasonMemberFailureUnconfirmed, partitionWindow, p.Status.Conditions)
	} else {
		t.Logf("%s shown %.1fs after the cut", v1alpha1.ReasonMemberFailureUnconfirmed, shownAt.Seconds())
	}
	for _, d := range p.Status.RecentDecisions {
		if d.Object == "ReplicaSchedulingPreference/"+ns+"/"+name && (d.Reason == planner.ReasonMemberFailed ||
			d.Reason == planner.ReasonMemberUnreachable || d.Action == "ShiftedWeights") {
			t.Errorf("decision %+v: the RSP was shifted for a member kubefed reports Ready", d)
		}
	}
}
