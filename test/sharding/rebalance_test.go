//go:build e2e

package sharding

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/test/lab"
)

// Sharded rebalance with separate manager processes. The workload of each
// case is an RSP over two members: the member under test and a spare.
const (
	rbTotal = 4
	rbName  = "web"
	// kubefedPeriod is the lab kubefed's cluster health check period:
	// a member failure is kubefed's verdict, so two failures can be told
	// apart by up to one period whoever holds the member.
	kubefedPeriod = 10 * time.Second
	// summaryLag bounds what reading a member through another replica's
	// summary may add to a decision: the holder's flush (500 ms), the
	// leader's watch and pass, and slack for a loaded lab.
	summaryLag = 5 * time.Second
)

// rbCase is a member under test and the replica that holds it.
type rbCase struct {
	role   string // "leader" or "non-leader"
	member string
	holder *replica
	spare  string // the RSP's other member
}

// TestShardedRebalanceAcrossManagerProcesses runs three manager processes
// with --shard --sharded-rebalance. Only the leader writes RSPs; it sees
// a member held by another replica only through that replica's
// MemberSummary. For a member held by a non-leader and one held by the
// leader, in turn: its API server is killed (the RSP is shifted off it),
// it comes back (the failback returns the user's weights, never fewer
// Ready replicas than the total), and it runs out of room (the RSP is
// shifted off it). Each time to shift is logged, and the non-leader's
// must be as fast as the leader's: within one kubefed health check period
// for a failure (kubefed's verdict, read by the leader itself), within
// summaryLag for exhaustion (seen only through the summary).
func TestShardedRebalanceAcrossManagerProcesses(t *testing.T) {
	f := newFixture(t)
	leader, cases := f.shardedRebalanceReplicas()
	t.Logf("leader %s (%s); cases %s: %s held by %s, %s: %s held by %s", leader.name, leader.identity(),
		cases[0].role, cases[0].member, cases[0].holder.name, cases[1].role, cases[1].member, cases[1].holder.name)

	type result struct{ failure, failback, exhaustion time.Duration }
	results := map[string]*result{}
	for _, c := range cases {
		res := &result{}
		results[c.role] = res
		t.Run("failure-"+c.role, func(t *testing.T) {
			res.failure, res.failback = f.memberFailure(t, leader, c, "sr-fail-"+c.role)
		})
		t.Run("exhaustion-"+c.role, func(t *testing.T) {
			res.exhaustion = f.exhaustion(t, leader, c, "sr-exhaust-"+c.role)
		})
	}

	n, l := results["non-leader"], results["leader"]
	for _, k := range []struct {
		what   string
		nv, lv time.Duration
	}{{"member-failure", n.failure, l.failure}, {"failback", n.failback, l.failback}, {"exhaustion", n.exhaustion, l.exhaustion}} {
		t.Logf("%s: held by a non-leader %.1fs, held by the leader %.1fs", k.what, k.nv.Seconds(), k.lv.Seconds())
		fmt.Printf("SHARDED-REBALANCE %s non-leader=%.1f leader=%.1f\n", k.what, k.nv.Seconds(), k.lv.Seconds())
	}
	if t.Failed() {
		return // a case did not finish: its figures are not comparable
	}
	if n.failure > l.failure+kubefedPeriod {
		t.Errorf("member failure shifted %.1fs after the kill on a non-leader's member, %.1fs on the leader's: want within %s of it",
			n.failure.Seconds(), l.failure.Seconds(), kubefedPeriod)
	}
	if n.exhaustion > l.exhaustion+summaryLag {
		t.Errorf("exhaustion shifted %.1fs after it was seen on a non-leader's member, %.1fs on the leader's: want within %s of it",
			n.exhaustion.Seconds(), l.exhaustion.Seconds(), summaryLag)
	}
}

// shardedRebalanceReplicas starts replica-0 alone, so that it leads, then
// two more, all with --sharded-rebalance, and returns the leader with a
// case for a member a non-leader holds and one the leader holds, each with
// a spare member outside both. Identities are random: while every other
// replica holds no member, a non-leader is started again as a new peer;
// while the leader holds none, all three are started again (a new
// non-leader alone rarely beats the leader's fixed identity to a member).
func (f *fixture) shardedRebalanceReplicas() (*replica, []rbCase) {
	t := f.t
	t.Helper()
	startAll := func(suffix string) []*replica {
		leader := f.startReplica("replica-0"+suffix, nil, "--sharded-rebalance")
		poll(t, time.Minute, 500*time.Millisecond, leader.name+" leading", func(context.Context) (bool, string) {
			return leader.leads(), "not the leader yet"
		})
		return []*replica{leader, f.startReplica("replica-1"+suffix, nil, "--sharded-rebalance"),
			f.startReplica("replica-2"+suffix, nil, "--sharded-rebalance")}
	}
	replicas := startAll("")
	for attempt := 1; ; attempt++ {
		leader := replicas[0]
		settled(t, replicas, f.members)
		var other *replica
		for _, r := range replicas[1:] {
			if len(r.connected()) > 0 {
				other = r
				break
			}
		}
		own := leader.connected()
		if len(own) > 0 && other != nil {
			if !leader.leads() {
				t.Fatalf("%s no longer leads", leader.name)
			}
			watchConnections(t, replicas)
			f.ownedAsConnected(replicas)
			mN, mL := other.connected()[0], own[0]
			spare := ""
			for _, m := range f.members {
				if m != mN && m != mL {
					spare = m
					break
				}
			}
			return leader, []rbCase{
				{role: "non-leader", member: mN, holder: other, spare: spare},
				{role: "leader", member: mL, holder: leader, spare: spare},
			}
		}
		if attempt == 5 {
			t.Fatal("in 5 starts, the leader or the other replicas never held a member")
		}
		t.Logf("%s holds %v, others %v and %v", leader.name, own, replicas[1].connected(), replicas[2].connected())
		if len(own) == 0 {
			t.Logf("starting all three replicas again")
			for _, r := range replicas {
				if err := r.proc.Stop(20 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
			replicas = startAll(fmt.Sprintf("-%d", attempt))
			continue
		}
		restart := replicas[len(replicas)-1]
		t.Logf("starting %s again", restart.name)
		if err := restart.proc.Stop(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		replicas[len(replicas)-1] = f.startReplica(fmt.Sprintf("%s-%d", restart.name, attempt), nil, "--sharded-rebalance")
	}
}

// memberFailure kills c.member's API server under a workload split 2/2
// over it and its spare, and returns the time from the kill to the RSP
// pinning it to 0, and from its return to the user's weights back (and
// split 2/2 Ready), never with fewer Ready pods than the total.
func (f *fixture) memberFailure(t *testing.T, leader *replica, c rbCase, ns string) (shift, failback time.Duration) {
	f.rebalancePolicy(t, ns)
	members := []string{c.member, c.spare}
	f.federatedWorkload(t, ns, members)
	poll(t, 2*time.Minute, 500*time.Millisecond, "web split 2/2 and Ready", func(ctx context.Context) (bool, string) {
		return split(ctx, ns, members, rbTotal/2, rbTotal/2)
	})
	f.heldAsCase(t, leader, c, ns)

	if err := theLab.KillAPIServer(c.member); err != nil {
		t.Fatal(err)
	}
	alive := false
	t.Cleanup(func() {
		if !alive {
			if err := theLab.RestartAPIServer(context.Background(), c.member); err != nil {
				t.Errorf("restarting %s: %v", c.member, err)
			}
		}
	})
	shift = poll(t, 2*time.Minute, 200*time.Millisecond, "the RSP pinning "+c.member+" to 0", func(ctx context.Context) (bool, string) {
		r, err := f.rsp(ctx, ns)
		if err != nil {
			return false, err.Error()
		}
		return pinnedTo(r, c.member, 0), rspString(r, members)
	})
	t.Logf("%s (held by the %s %s) killed: RSP shifted off it %.1fs later", c.member, c.role, c.holder.name, shift.Seconds())
	poll(t, 90*time.Second, 500*time.Millisecond, c.spare+" runs all replicas", func(ctx context.Context) (bool, string) {
		s, r, err := theLab.DeploymentReplicas(ctx, c.spare, ns, rbName)
		return err == nil && s == rbTotal && r == rbTotal, fmt.Sprintf("%s %d (ready %d) %v", c.spare, s, r, err)
	})

	if err := theLab.RestartAPIServer(t.Context(), c.member); err != nil {
		t.Fatal(err)
	}
	alive = true
	back := time.Now()
	var changes []string
	last := ""
	minReady := int32(rbTotal)
	failback = poll(t, 3*time.Minute, 500*time.Millisecond, "the user's weights back, web split 2/2", func(ctx context.Context) (bool, string) {
		r, err := f.rsp(ctx, ns)
		if err != nil {
			return false, err.Error()
		}
		if s := rspString(r, members); s != last {
			last = s
			changes = append(changes, fmt.Sprintf("+%.0fs %s", time.Since(back).Seconds(), s))
		}
		if n, ok := readyPods(ctx, ns, members); ok {
			minReady = min(minReady, n)
		}
		if !weightsOnly(r, map[string]int64{c.member: 1, c.spare: 1}) {
			return false, last
		}
		return split(ctx, ns, members, rbTotal/2, rbTotal/2)
	})
	t.Logf("%s back: failback done %.1fs later; RSP during failback: %v", c.member, failback.Seconds(), changes)
	if minReady < rbTotal {
		t.Errorf("Ready pods dropped to %d during the failback, want at least %d (make-before-break)", minReady, rbTotal)
	}
	f.heldAsCase(t, leader, c, ns)
	return shift, failback
}

// exhaustion leaves c.member without room before the workload comes, and
// returns the time from this test first seeing one of its replicas there
// Unschedulable to the RSP pinning it to 0.
func (f *fixture) exhaustion(t *testing.T, leader *replica, c rbCase, ns string) time.Duration {
	if err := theLab.ExhaustCapacity(t.Context(), c.member, lab.ExhaustCordon); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := theLab.RestoreCapacity(context.Background(), c.member); err != nil {
			t.Errorf("restoring the capacity of %s: %v", c.member, err)
		}
	})
	f.rebalancePolicy(t, ns)
	members := []string{c.member, c.spare}
	f.federatedWorkload(t, ns, members)
	cl := theLab.MustClient(c.member)
	poll(t, 90*time.Second, 200*time.Millisecond, "a replica Unschedulable in "+c.member, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": rbName}); err != nil {
			return false, err.Error()
		}
		for i := range pods.Items {
			for _, cond := range pods.Items[i].Status.Conditions {
				if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d pods, none Unschedulable", len(pods.Items))
	})
	shift := poll(t, 90*time.Second, 200*time.Millisecond, "the RSP pinning "+c.member+" to 0", func(ctx context.Context) (bool, string) {
		r, err := f.rsp(ctx, ns)
		if err != nil {
			return false, err.Error()
		}
		return pinnedTo(r, c.member, 0), rspString(r, members)
	})
	t.Logf("%s (held by the %s %s) out of room: RSP shifted off it %.1fs after a replica was seen Unschedulable", c.member, c.role, c.holder.name, shift.Seconds())
	poll(t, 90*time.Second, 500*time.Millisecond, c.spare+" runs all replicas", func(ctx context.Context) (bool, string) {
		s, r, err := theLab.DeploymentReplicas(ctx, c.spare, ns, rbName)
		return err == nil && s == rbTotal && r == rbTotal, fmt.Sprintf("%s %d (ready %d) %v", c.spare, s, r, err)
	})
	f.heldAsCase(t, leader, c, ns)
	return shift
}

// heldAsCase checks the case still measures what it claims: replica-0
// leads, the member's Lease is its holder's, and for a non-leader the
// summary the leader reads is that holder's and lists the workload.
func (f *fixture) heldAsCase(t *testing.T, leader *replica, c rbCase, ns string) {
	t.Helper()
	if !leader.leads() {
		t.Fatalf("%s no longer leads", leader.name)
	}
	hs, err := f.holders(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if id := c.holder.identity(); hs[c.member] != id {
		t.Fatalf("%s held by %q, want %s (%s)", c.member, hs[c.member], c.holder.name, id)
	}
	if c.holder == leader {
		return
	}
	poll(t, 30*time.Second, 500*time.Millisecond, "the summary of "+c.member+" by "+c.holder.name, func(ctx context.Context) (bool, string) {
		var list v1alpha1.MemberSummaryList
		if err := f.host.List(ctx, &list, client.InNamespace(f.ns)); err != nil {
			return false, err.Error()
		}
		for _, s := range list.Items {
			if s.Spec.Member != c.member {
				continue
			}
			listed := slices.ContainsFunc(s.Spec.Workloads, func(w v1alpha1.WorkloadSummary) bool { return w.Namespace == ns && w.Name == rbName })
			return s.Spec.Holder == c.holder.identity() && listed, fmt.Sprintf("by %s, workloads %+v", s.Spec.Holder, s.Spec.Workloads)
		}
		return false, "no summary"
	})
}

// rebalancePolicy creates a policy rebalancing the RSPs of ns with the
// rebalance e2e tests' short times, deleted when t ends.
func (f *fixture) rebalancePolicy(t *testing.T, ns string) {
	t.Helper()
	p := &v1alpha1.FailoverPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: v1alpha1.FailoverPolicySpec{Rebalance: &v1alpha1.RebalanceSpec{
		CapacityExhaustedAfter: "5s", ClusterFailedAfter: "10s", MinInterval: "5s",
		Failback:                     v1alpha1.FailbackSpec{StabilizationWindow: "20s", MaxStep: 2, MakeBeforeBreak: true},
		ReplicaSchedulingPreferences: v1alpha1.PodScope{Namespaces: []string{ns}},
		// The Unschedulable signal through summaries is what is tested;
		// predictive caps from summaries: TestShardedRebalancePredictsFromTheSummary.
		Placement: v1alpha1.PlacementReactive,
	}}}
	if err := f.host.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.deletePolicy(t, p) })
}

// federatedWorkload creates web (rbTotal replicas, weights 1/1 over
// members) in ns, its RSP and FederatedDeployment deleted when t ends.
func (f *fixture) federatedWorkload(t *testing.T, ns string, members []string) {
	t.Helper()
	if err := theLab.ApplyYAML(t.Context(), lab.HostName, lab.FederatedDeploymentYAML(ns, rbName, rbTotal, members)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, k := range []struct{ gv, kind string }{
			{"scheduling.kubefed.io/v1alpha1", "ReplicaSchedulingPreference"},
			{"types.kubefed.io/v1beta1", "FederatedDeployment"},
		} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(k.gv)
			u.SetKind(k.kind)
			u.SetNamespace(ns)
			u.SetName(rbName)
			_ = f.host.Delete(context.Background(), u)
		}
	})
}

func (f *fixture) rsp(ctx context.Context, ns string) (*fedschedv1a1.ReplicaSchedulingPreference, error) {
	r := &fedschedv1a1.ReplicaSchedulingPreference{}
	return r, f.host.Get(ctx, client.ObjectKey{Namespace: ns, Name: rbName}, r)
}

// split reports whether web wants and runs want[i] Ready replicas in
// members[i].
func split(ctx context.Context, ns string, members []string, want ...int32) (bool, string) {
	ok := true
	var got []string
	for i, m := range members {
		s, r, err := theLab.DeploymentReplicas(ctx, m, ns, rbName)
		if err != nil {
			return false, fmt.Sprintf("%s: %v", m, err)
		}
		ok = ok && s == want[i] && r == want[i]
		got = append(got, fmt.Sprintf("%s %d (ready %d)", m, s, r))
	}
	return ok, strings.Join(got, ", ")
}

// readyPods counts web's Ready pods over members; ok is false when a
// member could not be read.
func readyPods(ctx context.Context, ns string, members []string) (n int32, ok bool) {
	for _, m := range members {
		cl, err := theLab.Client(m)
		if err != nil {
			return 0, false
		}
		pods := &corev1.PodList{}
		if err := cl.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": rbName}); err != nil {
			return 0, false
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; lab.PodReady(p) && p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n, true
}

// pinnedTo reports whether the RSP pins member to exactly n replicas.
func pinnedTo(r *fedschedv1a1.ReplicaSchedulingPreference, member string, n int64) bool {
	p, ok := r.Spec.Clusters[member]
	return ok && p.MaxReplicas != nil && *p.MaxReplicas == n && p.MinReplicas == n && p.Weight == n
}

// weightsOnly reports whether the RSP holds exactly these weights and the
// total, without pins: the user's spec.
func weightsOnly(r *fedschedv1a1.ReplicaSchedulingPreference, weights map[string]int64) bool {
	if r.Spec.TotalReplicas != rbTotal || len(r.Spec.Clusters) != len(weights) {
		return false
	}
	for n, w := range weights {
		p, ok := r.Spec.Clusters[n]
		if !ok || p.Weight != w || p.MinReplicas != 0 || p.MaxReplicas != nil {
			return false
		}
	}
	return true
}

func rspString(r *fedschedv1a1.ReplicaSchedulingPreference, members []string) string {
	s := fmt.Sprintf("total %d:", r.Spec.TotalReplicas)
	for _, n := range members {
		p := r.Spec.Clusters[n]
		maxR := "-"
		if p.MaxReplicas != nil {
			maxR = fmt.Sprint(*p.MaxReplicas)
		}
		s += fmt.Sprintf(" %s{w%d min%d max%s}", n, p.Weight, p.MinReplicas, maxR)
	}
	return s
}
