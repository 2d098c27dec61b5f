package rebalance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
)

// Turning rebalance off safely (issue #29, item 9): a release gives the
// baseline back only where kubefed alone would put replicas now, and
// stepwise where replicas move back. These run on the real API server,
// with kubefed and the members played by the test: after each pass each
// member runs what the RSP asks of it, scale-downs at once, new replicas
// Ready only by the next pass (the slowest kubefed and kubelets can be).

// releaseFixture is the user's 1:1 RSP of 6 replicas shifted 6:0 onto
// member1 by policy name (maxStep 2, make-before-break), member1 running
// the 6, member2 none; the policy carries its finalizer.
func releaseFixture(t *testing.T, name string, member2 func(ns string) []client.Object) (*Reconciler, client.Client, *fakeMembers, *v1alpha1.FailoverPolicy, types.NamespacedName, contract.Placement) {
	t.Helper()
	pol := rebalancing(name, func(p *v1alpha1.FailoverPolicy) { p.Finalizers = []string{contract.FinalizerRebalance} })
	r, c, _, ns := onHost(t, pol)
	fm := noMembers(t)
	fm.add(t, "member1", webOn(ns, "member1", 6)...)
	if member2 == nil {
		member2 = func(ns string) []client.Object { return webOn(ns, "member2", 0) }
	}
	fm.add(t, "member2", member2(ns)...)
	r.members, r.opts = kubefedSeesDown{fm}, Options{}.withDefaults()
	key, user := shiftedOnHost(t, r, c, ns, pol.Name)
	return r, c, fm, pol, key, user
}

// deletePolicy deletes the policy and runs its finalizer, which must not
// wait for the release: the policy is gone after it.
func deletePolicy(t *testing.T, r *Reconciler, c client.Client, pol *v1alpha1.FailoverPolicy) {
	t.Helper()
	if err := c.Delete(context.Background(), pol); err != nil {
		t.Fatal(err)
	}
	reconcileFinalizer(t, r, pol.Name)
}

// wantCounts is how many replicas kubefed asks of each member for spec
// (pins: maxReplicas; the user's 1:1: by weight).
func wantCounts(rsp *fedschedv1a1.ReplicaSchedulingPreference) map[string]int {
	out := map[string]int{}
	var weights int64
	for _, n := range []string{"member1", "member2"} {
		weights += rsp.Spec.Clusters[n].Weight
	}
	for _, n := range []string{"member1", "member2"} {
		p := rsp.Spec.Clusters[n]
		switch {
		case p.MaxReplicas != nil:
			out[n] = int(*p.MaxReplicas)
		case weights > 0:
			out[n] = int(int64(rsp.Spec.TotalReplicas) * p.Weight / weights)
		}
	}
	return out
}

// runningOn counts the Ready replicas of web on a member.
func runningOn(t *testing.T, fm *fakeMembers, ns, member string) int {
	t.Helper()
	var pods corev1.PodList
	if err := fm.readers[member].List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(pods.Items)
}

// setAssigned gives member's Deployment of web n replicas, as kubefed
// does, observed by its controller at once.
func setAssigned(t *testing.T, fm *fakeMembers, ns, member string, n int) {
	t.Helper()
	d := &appsv1.Deployment{}
	mc := fm.readers[member]
	if err := mc.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas != nil && int(*d.Spec.Replicas) == n {
		return
	}
	d.Spec.Replicas = ptr.To(int32(n))
	if err := mc.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// setRunning makes member run n Ready replicas of web, its Deployment
// assigned n.
func setRunning(t *testing.T, fm *fakeMembers, ns, member string, n int) {
	t.Helper()
	setAssigned(t, fm, ns, member, n)
	ctx := context.Background()
	mc := fm.readers[member]
	var pods corev1.PodList
	if err := mc.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := len(pods.Items) - 1; i >= n; i-- {
		if err := mc.Delete(ctx, &pods.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range webOn(ns, member, n) {
		if p, ok := o.(*corev1.Pod); ok {
			if err := mc.Create(ctx, p); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
		}
	}
}

// releasePasses runs passes over key, 5s apart from start, playing kubefed
// and the kubelets after each (fewer replicas at once, more only Ready by
// the next pass) on the reachable members; first on the RSP as it is, which
// was written since resourceVersion rv (by the finalizer) or not. It
// returns the lowest Ready total seen between passes and the RSP
// placements written, in order.
func releasePasses(t *testing.T, r *Reconciler, c client.Client, fm *fakeMembers, key types.NamespacedName, rv string, start time.Time, passes int) (int, []map[string]int) {
	t.Helper()
	return releasePassesStale(t, r, c, fm, key, rv, start, passes, nil)
}

// releasePassesStale is releasePasses with kubefed not syncing the members
// in stale: their Deployment and pods stay as they are.
func releasePassesStale(t *testing.T, r *Reconciler, c client.Client, fm *fakeMembers, key types.NamespacedName, rv string, start time.Time, passes int,
	stale map[string]bool) (int, []map[string]int) {
	t.Helper()
	lowest := 1 << 30
	var writes []map[string]int
	for i := range passes + 1 {
		if i > 0 {
			passAt(t, r, key, start.Add(time.Duration(i-1)*5*time.Second))
		}
		rsp := specOf(t, c, key)
		want := wantCounts(rsp)
		if rsp.ResourceVersion != rv {
			rv = rsp.ResourceVersion
			writes = append(writes, want)
		}
		ready := 0
		for _, n := range []string{"member1", "member2"} {
			if fm.down[n] || stale[n] {
				if !fm.down[n] {
					ready += runningOn(t, fm, key.Namespace, n)
				}
				continue
			}
			setAssigned(t, fm, key.Namespace, n, want[n])
			if have := runningOn(t, fm, key.Namespace, n); want[n] < have {
				setRunning(t, fm, key.Namespace, n, want[n])
			}
			ready += runningOn(t, fm, key.Namespace, n)
		}
		lowest = min(lowest, ready)
		for _, n := range []string{"member1", "member2"} {
			if !fm.down[n] && !stale[n] && want[n] > runningOn(t, fm, key.Namespace, n) {
				setRunning(t, fm, key.Namespace, n, want[n])
			}
		}
	}
	return lowest, writes
}

func pinnedAtZero(rsp *fedschedv1a1.ReplicaSchedulingPreference, member string) bool {
	p := rsp.Spec.Clusters[member]
	return p.MaxReplicas != nil && *p.MaxReplicas == 0
}

// (a) The policy is deleted while member2 is failed (kubefed reports it not
// Ready, fedfailover cannot reach it) and member1 carries its replicas:
// member2 keeps its pin at maxReplicas 0 and the record is not released;
// the policy goes all the same. Once member2 is back and healthy the
// baseline is restored and the record released.
func TestReleaseKeepsFailedMemberPinned(t *testing.T) {
	r, c, fm, pol, key, user := releaseFixture(t, "rel-failed", nil)
	fm.down["member2"] = true
	deletePolicy(t, r, c, pol)
	for i := range 4 {
		passAt(t, r, key, t0.Add(time.Duration(i)*10*time.Second))
		if got := specOf(t, c, key); !pinnedAtZero(got, "member2") {
			t.Fatalf("pass %d with member2 not Ready in kubefed: spec %+v, want member2 kept at maxReplicas 0", i, got.Spec)
		}
	}
	if rec := recordOf(t, c, key); rec.Spec.Released {
		t.Fatalf("record released while member2 keeps its pin: %+v", rec.Spec)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: pol.Name}, &v1alpha1.FailoverPolicy{}); err == nil {
		t.Error("the deleted policy waits for the release: its finalizer must hand the release over to the record")
	}

	fm.down["member2"] = false
	lowest, _ := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, t0.Add(time.Minute), 12)
	wantReleased(t, c, key, user)
	if lowest < 6 {
		t.Errorf("Ready fell to %d during the release, want never below the user's 6", lowest)
	}
}

// (b) The policy is deleted while member2 is out of room (Ready in kubefed,
// reachable, but its node takes no more pods): no replica is sent there,
// the record stays unreleased.
func TestReleaseSendsNothingToAFullMember(t *testing.T) {
	r, c, _, pol, key, _ := releaseFixture(t, "rel-full", func(ns string) []client.Object {
		objs := webOn(ns, "member2", 0)
		objs[2] = readyNode("n1", 0) // its one node takes no more pods
		return objs
	})
	deletePolicy(t, r, c, pol)
	for i := range 6 {
		passAt(t, r, key, t0.Add(time.Duration(i)*10*time.Second))
		got := specOf(t, c, key)
		if n := wantCounts(got)["member2"]; n != 0 || !pinnedAtZero(got, "member2") {
			t.Fatalf("pass %d with member2 out of room: spec %+v asks %d replicas of member2, want it kept at maxReplicas 0", i, got.Spec, n)
		}
	}
	if rec := recordOf(t, c, key); rec.Spec.Released {
		t.Errorf("record released while member2 keeps its pin: %+v", rec.Spec)
	}
}

// (c) Released with member2 healthy and with room: the replicas move back
// stepwise (maxStep 2 of a shift of 3, make-before-break): no write gives
// member2 more than 2 replicas at once, Ready never falls below the user's
// 6, and the last write is the user's own spec, with the record released.
func TestReleaseMovesBackStepwise(t *testing.T) {
	r, c, fm, pol, key, user := releaseFixture(t, "rel-steps", nil)
	rv := specOf(t, c, key).ResourceVersion
	deletePolicy(t, r, c, pol)
	lowest, writes := releasePasses(t, r, c, fm, key, rv, t0, 12)
	t.Logf("writes: %v, lowest Ready %d", writes, lowest)
	if len(writes) == 0 {
		t.Fatal("nothing written: want the baseline back")
	}
	prev := 0
	for i, w := range writes {
		if w["member2"]-prev > 2 {
			t.Errorf("write %d of %d gives member2 %d replicas at once (%v), want at most maxStep 2 per step: writes %v",
				i+1, len(writes), w["member2"]-prev, w, writes)
		}
		prev = w["member2"]
	}
	if lowest < 6 {
		t.Errorf("Ready fell to %d during the release (writes %v), want never below the user's 6", lowest, writes)
	}
	wantReleased(t, c, key, user)
	if fmt.Sprint(writes[len(writes)-1]) != fmt.Sprint(map[string]int{"member1": 3, "member2": 3}) {
		t.Errorf("last write %v, want the user's 3:3", writes[len(writes)-1])
	}
}

// Rebalancing turned off while member2 is failed: the policy's Rebalancing
// condition and the RSP's record say what the release waits for.
func TestReleaseSaysWhatItWaitsFor(t *testing.T) {
	r, c, fm, pol, key, _ := releaseFixture(t, "rel-says", nil)
	fm.down["member2"] = true
	orig := pol.DeepCopy()
	pol.Spec.Rebalance.Enabled = ptr.To(false)
	if err := c.Patch(context.Background(), pol, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	reconcileFinalizer(t, r, pol.Name)
	passAt(t, r, key, t0)
	const want = "member2 is not Ready in kubefed; its pin stays (0 of its 3 replicas)"
	if rel := recordOf(t, c, key).Spec.Release; rel == nil || !strings.Contains(rel.Waiting, want) {
		t.Errorf("record's release %+v, want it waiting with %q", rel, want)
	}
	got := &v1alpha1.FailoverPolicy{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pol), got); err != nil {
		t.Fatal(err)
	}
	entries, _ := r.store.Snapshot(pol.Name)
	cond := meta.FindStatusCondition(desiredStatus(got, entries).Conditions, v1alpha1.ConditionRebalancing)
	if cond == nil || cond.Reason != v1alpha1.ReasonReleasing || !strings.Contains(cond.Message, want) {
		t.Errorf("Rebalancing %+v, want reason %s saying %q", cond, v1alpha1.ReasonReleasing, want)
	}
}

// A paused policy writes nothing, its releases included: rebalancing
// turned off on a paused policy leaves the shifted RSP as it is.
func TestReleaseOfPausedPolicyWritesNothing(t *testing.T) {
	r, c, _, pol, key, _ := releaseFixture(t, "rel-paused", nil)
	orig := pol.DeepCopy()
	pol.Spec.Paused, pol.Spec.Rebalance.Enabled = true, ptr.To(false)
	if err := c.Patch(context.Background(), pol, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	before := specOf(t, c, key).ResourceVersion
	for i := range 3 {
		passAt(t, r, key, t0.Add(time.Duration(i)*10*time.Second))
	}
	if got := specOf(t, c, key); got.ResourceVersion != before {
		t.Errorf("RSP written under a paused policy: %+v", got.Spec)
	}
	if rec := recordOf(t, c, key); rec.Spec.Released {
		t.Error("record released under a paused policy")
	}
}

// A member back from a failure still runs the replicas it had before it
// failed, its Deployment at the old count, until kubefed syncs it: those
// Ready pods are on their way out (kubefed gives the member what the RSP
// assigns now). The release's break waits until kubefed has given the
// member its step; before, it counted them and gave member1's replicas up
// at once (on the lab, Ready fell to 5 of 6). Then, synced, the release
// completes with Ready never below the user's 6.
func TestReleaseBreakWaitsForKubefedToSyncAReturningMember(t *testing.T) {
	r, c, fm, pol, key, user := releaseFixture(t, "rel-stale", func(ns string) []client.Object { return webOn(ns, "member2", 3) })
	fm.down["member2"] = true
	deletePolicy(t, r, c, pol)
	passAt(t, r, key, t0)
	fm.down["member2"] = false
	stale := map[string]bool{"member2": true}
	_, writes := releasePassesStale(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, t0.Add(time.Minute), 6, stale)
	if len(writes) != 1 || writes[0]["member1"] != 6 || writes[0]["member2"] != 2 {
		t.Fatalf("writes while kubefed has not synced member2: %v, want only the first step (member1 6, member2 2)", writes)
	}
	const want = "waiting for kubefed to give member2 its 2 replicas"
	if rel := recordOf(t, c, key).Spec.Release; rel == nil || !strings.Contains(rel.Waiting, want) {
		t.Errorf("record's release %+v, want it waiting with %q", rel, want)
	}
	lowest, _ := releasePasses(t, r, c, fm, key, specOf(t, c, key).ResourceVersion, t0.Add(2*time.Minute), 12)
	wantReleased(t, c, key, user)
	if lowest < 6 {
		t.Errorf("Ready fell to %d during the release, want never below the user's 6", lowest)
	}
}
