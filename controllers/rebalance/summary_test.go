package rebalance

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
)

// Sharded rebalance on the real API server, with two replicas in one test:
// a, the leader (the one RSP writer), holds member1; b holds member2 and
// publishes what it sees of it. member2 runs out of room (a replica
// Unschedulable): a sees it only through b's summary, and shifts
// replicas off member2 once capacityExhaustedAfter has passed, as it would
// for a member it held. Before that: a summary published by a replica that
// does not hold member2 (as a sees member2's Lease) is ignored, and so is
// one whose holder's Lease stopped changing; member2 is then Unknown and
// keeps what it holds.
func TestShardedRebalanceSeesAMemberHeldByAnotherReplica(t *testing.T) {
	pol := rebalancing("sharded", nil) // capacityExhaustedAfter 5s
	ra, c, _, ns := onHost(t, pol)
	rsp := userRSP(t, c, ns)
	key := client.ObjectKeyFromObject(rsp)
	user := specPlacement(rsp)

	fa := noMembers(t)
	fa.add(t, "member1", webOn(ns, "member1", 3)...)
	full := webOn(ns, "member2", 2)
	full[2] = readyNode("n1", 2) // its node runs 2 pods and takes no more
	fa.add(t, "member2", append(full, pendingReplica(ns, "member2"))...)
	fa.holders, fa.self = map[string]string{"member1": "a", "member2": "b"}, "a"
	opts := Options{Sharded: true, ShardedRebalance: true}.withDefaults()
	ra.members, ra.opts, ra.summaries = fa, opts, &summaryReader{reader: c, namespace: ns}

	fb := &fakeMembers{readers: fa.readers, down: fa.down, kubefedDown: fa.kubefedDown, holders: map[string]string{"member1": "a", "member2": "b"}, self: "b"}
	rb := &Reconciler{host: c, recorder: events.NewFakeRecorder(50), store: newStore(), mem: map[types.NamespacedName]*memory{},
		now: ra.now, members: fb, opts: opts}
	pub := newSummaryPublisher(c, ns, "b", fb.HoldsMember, time.Second)
	ob := &observer{r: rb, pub: pub}
	publish := func() {
		t.Helper()
		if _, err := ob.Reconcile(context.Background(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatal(err)
		}
		pub.flush(context.Background())
		sum := &v1alpha1.MemberSummary{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: summaryName("member2")}, sum); err != nil {
			t.Fatalf("member2's summary: %v", err)
		}
		if sum.Spec.Holder != "b" || len(sum.Spec.Workloads) != 1 || !sum.Spec.Workloads[0].Unschedulable || sum.Spec.Workloads[0].Running != 2 {
			t.Fatalf("member2's summary %+v, want b's, web Unschedulable with 2 Running", sum.Spec)
		}
	}
	untouched := func(when string) {
		t.Helper()
		if got := specPlacement(specOf(t, c, key)); !got.Equal(user) {
			t.Fatalf("%s: spec %+v, want the user's %+v", when, got.Clusters, user.Clusters)
		}
	}

	// No summary yet: member2 is Unknown to a.
	passAt(t, ra, key, t0)
	passAt(t, ra, key, t0.Add(time.Minute))
	untouched("no summary of member2")

	// b publishes; a sees member2's Lease held by c: not b's to speak for.
	publish()
	fa.holders = map[string]string{"member1": "a", "member2": "c"}
	for _, at := range []time.Duration{2 * time.Minute, 3 * time.Minute} {
		passAt(t, ra, key, t0.Add(at))
	}
	untouched("summary by b while c holds member2")
	// b's Lease stopped changing (as a sees it).
	fa.holders, fa.deadLease = map[string]string{"member1": "a", "member2": "b"}, map[string]bool{"member2": true}
	for _, at := range []time.Duration{4 * time.Minute, 5 * time.Minute} {
		passAt(t, ra, key, t0.Add(at))
	}
	untouched("summary by b whose Lease is not live")

	// b holds member2, live: its Unschedulable replica is exhaustion.
	fa.deadLease = nil
	passAt(t, ra, key, t0.Add(6*time.Minute))
	untouched("exhaustion first seen")
	passAt(t, ra, key, t0.Add(6*time.Minute+6*time.Second))
	got := specPlacement(specOf(t, c, key))
	if p := got.Clusters["member2"]; got.Equal(user) || p.MaxReplicas == nil || *p.MaxReplicas >= 3 {
		t.Fatalf("member2 out of room for capacityExhaustedAfter (seen through b's summary): spec %+v, want member2 capped below its 3", got.Clusters)
	}
}

// pendingReplica is a replica of web in member that no node can take.
func pendingReplica(ns, member string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1-pending",
		OwnerReferences: controllerRef("ReplicaSet", "web-1", types.UID("rs-"+member))},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
}
