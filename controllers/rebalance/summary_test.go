package rebalance

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/metrics"
)

// shardedPair is sharded rebalance on the real API server with two
// replicas in one test: a, the leader (the one RSP writer), holds member1;
// b holds member2 and publishes what it sees of it. member2 is out of room
// (a replica Unschedulable, its node full).
type shardedPair struct {
	t      *testing.T
	c      client.Client
	ns     string
	ra     *Reconciler
	fa, fb *fakeMembers
	pub    *summaryPublisher
	pubAt  time.Time // b's clock
	key    types.NamespacedName
	user   contract.Placement
}

func newShardedPair(t *testing.T, placement v1alpha1.PlacementMode) *shardedPair {
	pol := rebalancing("sharded", func(p *v1alpha1.FailoverPolicy) { p.Spec.Rebalance.Placement = placement }) // capacityExhaustedAfter 5s
	ra, c, _, ns := onHost(t, pol)
	rsp := userRSP(t, c, ns)
	p := &shardedPair{t: t, c: c, ns: ns, ra: ra, key: client.ObjectKeyFromObject(rsp), user: specPlacement(rsp), pubAt: t0}

	p.fa = noMembers(t)
	p.fa.add(t, "member1", webOn(ns, "member1", 3)...)
	full := webOn(ns, "member2", 2)
	full[2] = readyNode("n1", 2) // its node runs 2 pods and takes no more
	p.fa.add(t, "member2", append(full, pendingReplica(ns, "member2"))...)
	p.fa.holders, p.fa.self = map[string]string{"member1": "a", "member2": "b"}, "a"
	opts := Options{Sharded: true, ShardedRebalance: true}.withDefaults()
	ra.members, ra.opts = p.fa, opts
	ra.summaries = &summaryReader{reader: c, namespace: ns, clock: newSummaryClock(opts.SummaryStaleAfter)}

	p.fb = &fakeMembers{readers: p.fa.readers, down: p.fa.down, kubefedDown: p.fa.kubefedDown, holders: map[string]string{"member1": "a", "member2": "b"}, self: "b"}
	p.pub = newSummaryPublisher(c, ns, "b", p.fb.HoldsMember, time.Second, opts.SummaryRenew, func() time.Time { return p.pubAt })
	return p
}

// publish is b observing the RSP in what it holds and flushing.
func (p *shardedPair) publish() *v1alpha1.MemberSummary {
	t := p.t
	t.Helper()
	rb := &Reconciler{host: p.c, recorder: events.NewFakeRecorder(50), store: newStore(), mem: map[types.NamespacedName]*memory{},
		now: p.ra.now, members: p.fb, opts: p.ra.opts}
	ob := &observer{r: rb, pub: p.pub}
	if _, err := ob.Reconcile(context.Background(), ctrl.Request{NamespacedName: p.key}); err != nil {
		t.Fatal(err)
	}
	p.pub.flush(context.Background())
	sum := p.summary("member2")
	if sum == nil || sum.Spec.Holder != "b" || len(sum.Spec.Workloads) != 1 || !sum.Spec.Workloads[0].Unschedulable || sum.Spec.Workloads[0].Running != 2 {
		t.Fatalf("member2's summary %+v, want b's, web Unschedulable with 2 Running", sum)
	}
	return sum
}

// renew is b's next flush a renew period later, nothing changed.
func (p *shardedPair) renew() {
	p.pubAt = p.pubAt.Add(p.ra.opts.SummaryRenew)
	p.pub.flush(context.Background())
}

// summary is member's MemberSummary, nil when there is none.
func (p *shardedPair) summary(member string) *v1alpha1.MemberSummary {
	p.t.Helper()
	sum := &v1alpha1.MemberSummary{}
	err := p.c.Get(context.Background(), client.ObjectKey{Namespace: p.ns, Name: summaryName(member)}, sum)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return sum
}

func (p *shardedPair) untouched(when string) {
	p.t.Helper()
	if got := specPlacement(specOf(p.t, p.c, p.key)); !got.Equal(p.user) {
		p.t.Fatalf("%s: spec %+v, want the user's %+v", when, got.Clusters, p.user.Clusters)
	}
}

func (p *shardedPair) shifted(when string) {
	p.t.Helper()
	got := specPlacement(specOf(p.t, p.c, p.key))
	if m := got.Clusters["member2"]; got.Equal(p.user) || m.MaxReplicas == nil || *m.MaxReplicas >= 3 {
		p.t.Fatalf("%s: spec %+v, want member2 capped below its 3", when, got.Clusters)
	}
}

// The leader sees a member another replica holds through its summary,
// and shifts replicas off it once it is out of room for
// capacityExhaustedAfter, as it would for a member it held. Before that:
// a summary published by a replica that does not hold member2 (as a sees
// member2's Lease) is ignored, and so is one whose holder's Lease stopped
// changing; member2 is then Unknown and keeps what it holds.
func TestShardedRebalanceSeesAMemberHeldByAnotherReplica(t *testing.T) {
	p := newShardedPair(t, v1alpha1.PlacementReactive)
	ra := p.ra

	// No summary yet: member2 is Unknown to a.
	passAt(t, ra, p.key, t0)
	passAt(t, ra, p.key, t0.Add(time.Minute))
	p.untouched("no summary of member2")

	// b publishes; a sees member2's Lease held by c: not b's to speak for.
	p.publish()
	p.fa.holders = map[string]string{"member1": "a", "member2": "c"}
	for _, at := range []time.Duration{2 * time.Minute, 2*time.Minute + 10*time.Second} {
		passAt(t, ra, p.key, t0.Add(at))
	}
	p.untouched("summary by b while c holds member2")
	// b's Lease stopped changing (as a sees it).
	p.fa.holders, p.fa.deadLease = map[string]string{"member1": "a", "member2": "b"}, map[string]bool{"member2": true}
	p.renew()
	for _, at := range []time.Duration{3 * time.Minute, 3*time.Minute + 10*time.Second} {
		passAt(t, ra, p.key, t0.Add(at))
	}
	p.untouched("summary by b whose Lease is not live")

	// b holds member2, live, its summary renewed: its Unschedulable
	// replica is exhaustion.
	p.fa.deadLease = nil
	p.renew()
	passAt(t, ra, p.key, t0.Add(6*time.Minute))
	p.untouched("exhaustion first seen")
	passAt(t, ra, p.key, t0.Add(6*time.Minute+6*time.Second))
	p.shifted("member2 out of room for capacityExhaustedAfter (seen through b's summary)")
}

// A summary the leader has not seen change for SummaryStaleAfter, on its
// own clock, is Unknown however live its holder's Lease: the publisher
// may have stopped while the member changed. b's renewal (a new
// resourceVersion, the spec and generation unchanged) makes it count
// again. The publisher's clock (pubAt, ten hours off) is never read.
func TestShardedRebalanceStaleSummaryIsUnknown(t *testing.T) {
	p := newShardedPair(t, v1alpha1.PlacementReactive)
	ra := p.ra
	p.pubAt = t0.Add(10 * time.Hour)
	gauge := func() float64 { return testutil.ToFloat64(metrics.ShardSummaryUnknown.WithLabelValues("member2")) }

	passAt(t, ra, p.key, t0) // no summary: absent, on a's clock
	before := p.publish()
	passAt(t, ra, p.key, t0.Add(time.Minute)) // seen appearing: fresh
	p.untouched("exhaustion first seen")
	if gauge() != 0 {
		t.Errorf("fedfailover_shard_summary_unknown{member2} %v with a fresh summary, want 0", gauge())
	}

	// No write since: 40 s and 50 s after a saw it change it is stale
	// (30 s), so the exhaustion it shows is not acted on.
	for _, at := range []time.Duration{time.Minute + 40*time.Second, time.Minute + 50*time.Second} {
		passAt(t, ra, p.key, t0.Add(at))
	}
	p.untouched("summary unchanged for longer than SummaryStaleAfter")
	if gauge() != 1 {
		t.Errorf("fedfailover_shard_summary_unknown{member2} %v with a stale summary, want 1", gauge())
	}

	p.renew()
	after := p.summary("member2")
	if after.ResourceVersion == before.ResourceVersion || after.Generation != before.Generation || after.Annotations[summaryRenewal] != "1" {
		t.Fatalf("renewal: resourceVersion %s→%s, generation %d→%d, counter %q; want a new resourceVersion, the same generation, counter 1",
			before.ResourceVersion, after.ResourceVersion, before.Generation, after.Generation, after.Annotations[summaryRenewal])
	}
	// A renewal sooner than a renew period after the last write is not due.
	p.pub.flush(context.Background())
	if again := p.summary("member2"); again.ResourceVersion != after.ResourceVersion {
		t.Error("summary written again right after its renewal, nothing changed")
	}
	passAt(t, ra, p.key, t0.Add(2*time.Minute))
	passAt(t, ra, p.key, t0.Add(2*time.Minute+6*time.Second))
	p.shifted("renewed summary showing exhaustion")
	if gauge() != 0 {
		t.Errorf("fedfailover_shard_summary_unknown{member2} %v after the renewal, want 0", gauge())
	}
}

// The summary clock: a summary there before the first look proves nothing
// about its age; a change counts for staleAfter from when this replica saw
// it; a change after a stale sight revives it (the RSPs need a pass),
// one after a fresh sight does not; a deleted one appearing again is a
// change.
func TestSummaryClock(t *testing.T) {
	c := newSummaryClock(30 * time.Second)
	c.observe("s", "1", t0)
	if c.fresh("s", "1", t0) {
		t.Error("first sight counted as fresh")
	}
	if !c.revived("s", "2", t0.Add(time.Second)) || !c.fresh("s", "2", t0.Add(31*time.Second)) {
		t.Error("a change after an unproven sight: want revived and fresh for 30 s")
	}
	if c.fresh("s", "2", t0.Add(32*time.Second)) {
		t.Error("fresh 31 s after the change, want stale")
	}
	if c.revived("s", "3", t0.Add(10*time.Second)) || !c.fresh("s", "3", t0.Add(10*time.Second)) {
		t.Error("a renewal within staleAfter: want fresh, not revived")
	}
	if !c.revived("s", "4", t0.Add(time.Minute)) {
		t.Error("a renewal after a stale sight: want revived")
	}
	if c.fresh("s", "3", t0.Add(time.Minute)) {
		t.Error("an older resourceVersion counted as fresh")
	}
	c.forget("s")
	c.created("s", "9", t0.Add(2*time.Minute))
	if !c.fresh("s", "9", t0.Add(2*time.Minute)) {
		t.Error("a summary created after a delete: want fresh")
	}
}

// A MemberSummary of a member whose KubeFedCluster is gone is deleted,
// only as read (a summary written since is left for the next pass), and
// its former holder does not write it again; a joined member's is kept.
func TestMemberSummaryOfALeftMemberIsDeleted(t *testing.T) {
	p := newShardedPair(t, v1alpha1.PlacementReactive)
	c, ns := p.c, p.ns
	kubefedClustersOnHost(t, c, ns, "member1", "member2")
	p.fb.holders = map[string]string{"member1": "b", "member2": "b"}
	p.publish()
	p.summaryOf("member1")
	g := &summaryCollector{summaries: c, writer: c, live: c, kubefedNS: ns}
	collect := func(member string, r client.Reader) error {
		t.Helper()
		g.summaries = r
		_, err := g.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: summaryName(member)}})
		return err
	}
	deleted := testutil.ToFloat64(metrics.ShardSummariesDeleted)

	for _, m := range []string{"member1", "member2"} {
		if err := collect(m, c); err != nil || p.summary(m) == nil {
			t.Fatalf("%s joined: collect %v, summary %v; want it kept", m, err, p.summary(m))
		}
	}

	// member2 leaves; its summary is read, then renewed before the delete.
	stale := p.summary("member2")
	if err := c.Delete(context.Background(), &kubefedv1beta1.KubeFedCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "member2"}}); err != nil {
		t.Fatal(err)
	}
	p.renew()
	if err := collect("member2", staleReader{c, stale}); !apierrors.IsConflict(err) || p.summary("member2") == nil {
		t.Fatalf("delete of a summary written since it was read: %v, summary %v; want a conflict and the summary kept", err, p.summary("member2"))
	}
	if err := collect("member2", c); err != nil || p.summary("member2") != nil {
		t.Fatalf("member2 left: collect %v, summary %v; want it deleted", err, p.summary("member2"))
	}
	if got := testutil.ToFloat64(metrics.ShardSummariesDeleted) - deleted; got != 1 {
		t.Errorf("fedfailover_shard_summaries_deleted_total went up by %v, want 1", got)
	}

	// b no longer holds member2 (its Lease released with the member):
	// its publisher forgets it and does not write it again.
	p.fb.holders = map[string]string{"member1": "b"}
	p.renew()
	p.renew()
	if s := p.summary("member2"); s != nil {
		t.Fatalf("summary of the member that left written again: %+v", s.Spec)
	}
	if p.summary("member1") == nil {
		t.Fatal("member1's summary gone")
	}
	// What a reads of member2 now: Unknown.
	if o := p.ra.summaries.observation(context.Background(), "member2", "b", true, ns, "web", t0); !o.Unknown {
		t.Errorf("member2 without a summary read as %+v, want Unknown", o)
	}
}

func (p *shardedPair) summaryOf(member string) {
	p.t.Helper()
	if p.summary(member) == nil {
		p.t.Fatalf("no summary of %s", member)
	}
}

// staleReader returns obj for every Get: a cache that lags.
type staleReader struct {
	client.Reader
	obj *v1alpha1.MemberSummary
}

func (s staleReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.obj.DeepCopyInto(obj.(*v1alpha1.MemberSummary))
	return nil
}

// pendingReplica is a replica of web in member that no node can take.
func pendingReplica(ns, member string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1-pending",
		OwnerReferences: controllerRef("ReplicaSet", "web-1", types.UID("rs-"+member))},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
}

// Predictive placement reads a member another replica holds through its
// summary as it would the member's own cache: b publishes how many of
// member2's replicas are bound there, and a caps member2 at that, at the
// first pass that sees the summary, before capacityExhaustedAfter.
func TestShardedRebalancePredictsFromTheSummary(t *testing.T) {
	p := newShardedPair(t, v1alpha1.PlacementPredictive)
	sum := p.publish()
	if w := sum.Spec.Workloads[0]; w.Placed == nil || *w.Placed != 2 {
		t.Fatalf("member2's summary placed %v, want 2 (its replicas bound to its full node)", w.Placed)
	}
	passAt(t, p.ra, p.key, t0) // a summary there at the first look proves nothing
	p.untouched("summary at the first look")
	p.renew()
	passAt(t, p.ra, p.key, t0.Add(time.Second))
	p.shifted("member2 predicted short through b's summary, 1 s after the first look")
}

// A summary without the figure (written by an older holder) makes no
// prediction: the Unschedulable signal still caps member2 once it lasts.
func TestShardedSummaryWithoutPlacedMakesNoPrediction(t *testing.T) {
	old := newShardedPair(t, v1alpha1.PlacementPredictive)
	sum := old.publish()
	passAt(t, old.ra, old.key, t0)
	sum.Spec.Workloads[0].Placed = nil
	if err := old.c.Update(context.Background(), sum); err != nil {
		t.Fatal(err)
	}
	passAt(t, old.ra, old.key, t0.Add(time.Second))
	old.untouched("a summary without placed")
	passAt(t, old.ra, old.key, t0.Add(7*time.Second))
	old.shifted("a summary without placed, Unschedulable for capacityExhaustedAfter")
}
