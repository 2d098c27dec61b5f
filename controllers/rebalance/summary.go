package rebalance

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/shard"
)

// Sharded rebalance. With members sharded across replicas, each replica
// connects only to the members it holds, while RSPs have one writer (the
// elected leader). So every replica observes the members it holds for
// every RSP (observer, the same observe a rebalance pass runs) and
// publishes what it saw, per member, in a MemberSummary on the host
// (summaryPublisher, written on change, renewed otherwise); the writer reads the
// summaries of the members it does not hold (summaryReader). A summary
// counts only while its writer holds the member's Lease as the writer of
// RSPs sees that Lease (its own clock): a summary of a replica that lost
// the member, or whose Lease stopped changing, makes the member Unknown
// (it keeps what it holds) until the new holder publishes. Failure of a
// member never rests on a summary: it needs kubefed's own verdict, which
// the writer reads itself.
//
// A summary is also only as fresh as its last write: the holder rewrites
// an unchanged one every renew period (an annotation counter, so the
// writer of RSPs is not woken), and the writer of RSPs counts a summary
// only while it saw its resourceVersion change, on its own clock, within
// the stale-after period (summaryClock): a publisher that stopped, or a
// summary left from an earlier hold, reads as Unknown, never as room.
// The publisher's own timestamps are never read. The summary of a member
// that left the federation is deleted by the leader (summaryCollector).

// summaryPrefix names the MemberSummary of a member (shard.LeaseName).
const summaryPrefix = "fedfailover-summary-"

// summaryRenewal is the annotation counter the holder bumps to renew an
// unchanged summary (only its change matters, never its value as a time).
const summaryRenewal = "failover.fedfailover.io/summary-renewal"

// summaryName is the MemberSummary object of a member.
func summaryName(member string) string { return shard.LeaseName(summaryPrefix, member) }

// workloadKey is an RSP's key in a summary.
func workloadKey(ns, name string) string { return ns + "/" + name }

// toSummary is an observation as published.
func toSummary(ns, name string, o observation) v1alpha1.WorkloadSummary {
	s := v1alpha1.WorkloadSummary{Namespace: ns, Name: name, Unknown: o.Unknown, Healthy: o.Healthy, Running: o.Running,
		Fits: o.Fits, Unschedulable: o.Unschedulable, Assigned: o.Assigned, AssignedObserved: o.AssignedObserved}
	if o.Healthy && o.Placed >= 0 {
		s.Placed = &o.Placed
	}
	return s
}

// fromSummary is a published observation, kubefed Ready (the reader has
// already ruled out kubefed's confirmed failure).
func fromSummary(s v1alpha1.WorkloadSummary) observation {
	placed := int64(-1)
	if s.Placed != nil {
		placed = *s.Placed
	}
	return observation{KubefedReady: true, Unknown: s.Unknown, Healthy: s.Healthy, Running: s.Running, Fits: s.Fits, Placed: placed,
		Unschedulable: s.Unschedulable, Assigned: s.Assigned, AssignedObserved: s.AssignedObserved}
}

// summaryPublisher gathers this replica's observations of the members it
// holds and writes each member's MemberSummary when it changed (at most
// once per flush period).
type summaryPublisher struct {
	host      client.Client
	namespace string
	identity  string
	holds     func(member string) bool
	period    time.Duration
	// renew: an unchanged summary is written again this long after its
	// last write, so readers can tell a live publisher from a stopped one.
	renew time.Duration
	now   func() time.Time

	mu      sync.Mutex
	seen    map[string]map[string]v1alpha1.WorkloadSummary // member → workload key → summary
	dirty   map[string]bool
	written map[string]*v1alpha1.MemberSummary // as last written by this replica
	wroteAt map[string]time.Time               // this replica's clock
}

func newSummaryPublisher(host client.Client, namespace, identity string, holds func(string) bool, period, renew time.Duration, now func() time.Time) *summaryPublisher {
	return &summaryPublisher{host: host, namespace: namespace, identity: identity, holds: holds, period: period, renew: renew, now: now,
		seen: map[string]map[string]v1alpha1.WorkloadSummary{}, dirty: map[string]bool{}, written: map[string]*v1alpha1.MemberSummary{},
		wroteAt: map[string]time.Time{}}
}

// set records what this replica saw of an RSP's workload in a member it holds.
func (p *summaryPublisher) set(member string, s v1alpha1.WorkloadSummary) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.seen[member]
	if m == nil {
		m = map[string]v1alpha1.WorkloadSummary{}
		p.seen[member] = m
	}
	k := workloadKey(s.Namespace, s.Name)
	if old, ok := m[k]; ok && old == s {
		return
	}
	m[k] = s
	p.dirty[member] = true
}

// forget drops an RSP that is gone from every member's summary.
func (p *summaryPublisher) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := workloadKey(key.Namespace, key.Name)
	for member, m := range p.seen {
		if _, ok := m[k]; ok {
			delete(m, k)
			p.dirty[member] = true
		}
	}
}

// NeedLeaderElection: every replica publishes the members it holds.
func (p *summaryPublisher) NeedLeaderElection() bool { return false }

// Start flushes every period until ctx ends.
func (p *summaryPublisher) Start(ctx context.Context) error {
	t := time.NewTicker(p.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			p.flush(ctx)
		}
	}
}

// flush writes the summary of every changed member this replica still
// holds, and renews those written a renew period ago; a member no longer
// held is forgotten (its new holder publishes).
func (p *summaryPublisher) flush(ctx context.Context) {
	now := p.now()
	p.mu.Lock()
	type job struct {
		s     *v1alpha1.MemberSummary
		renew bool
	}
	var todo []job
	for member := range p.seen {
		if !p.holds(member) {
			delete(p.seen, member)
			delete(p.written, member)
			delete(p.dirty, member)
			delete(p.wroteAt, member)
			continue
		}
		// Due for renewal: a renew period after this replica's last
		// write, or never written by this replica (it may have just
		// started, or taken the member over).
		at, wrote := p.wroteAt[member]
		due := !wrote || now.Sub(at) >= p.renew
		if p.dirty[member] || due {
			todo = append(todo, job{p.summaryLocked(member), !p.dirty[member]})
		}
	}
	p.mu.Unlock()
	for _, j := range todo {
		s := j.s
		wrote, err := p.write(ctx, s, j.renew)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Publishing a member summary failed; retried at the next flush", "member", s.Spec.Member, "error", err.Error())
			continue
		}
		p.mu.Lock()
		if wrote {
			p.wroteAt[s.Spec.Member] = now
		}
		if cur := p.summaryLocked(s.Spec.Member); equality.Semantic.DeepEqual(cur.Spec, s.Spec) {
			delete(p.dirty, s.Spec.Member)
		}
		p.mu.Unlock()
	}
}

// summaryLocked is the summary of member as seen now, workloads sorted.
func (p *summaryPublisher) summaryLocked(member string) *v1alpha1.MemberSummary {
	ws := make([]v1alpha1.WorkloadSummary, 0, len(p.seen[member]))
	for _, w := range p.seen[member] {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b v1alpha1.WorkloadSummary) int {
		return strings.Compare(workloadKey(a.Namespace, a.Name), workloadKey(b.Namespace, b.Name))
	})
	return &v1alpha1.MemberSummary{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: summaryName(member)},
		Spec: v1alpha1.MemberSummarySpec{Member: member, Holder: p.identity, Workloads: ws}}
}

// write creates or updates the member's summary (optimistic lock on what
// this replica last wrote or read); renew writes it even unchanged, with
// the renewal counter bumped. wrote: the summary's resourceVersion changed.
func (p *summaryPublisher) write(ctx context.Context, want *v1alpha1.MemberSummary, renew bool) (wrote bool, err error) {
	p.mu.Lock()
	last := p.written[want.Spec.Member]
	p.mu.Unlock()
	if last == nil {
		cur := &v1alpha1.MemberSummary{}
		err := p.host.Get(ctx, client.ObjectKeyFromObject(want), cur)
		switch {
		case apierrors.IsNotFound(err):
			if err := p.host.Create(ctx, want, client.FieldOwner(FieldOwner)); err != nil {
				return false, fmt.Errorf("creating MemberSummary %s: %w", want.Name, err)
			}
			p.remember(want)
			return true, nil
		case err != nil:
			return false, fmt.Errorf("getting MemberSummary %s: %w", want.Name, err)
		}
		last = cur
	}
	if !renew && equality.Semantic.DeepEqual(last.Spec, want.Spec) {
		p.remember(last)
		return false, nil
	}
	next := last.DeepCopy()
	next.Spec = want.Spec
	if renew {
		n, _ := strconv.ParseUint(next.Annotations[summaryRenewal], 10, 64)
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, summaryRenewal, strconv.FormatUint(n+1, 10))
	}
	if err := p.host.Update(ctx, next, client.FieldOwner(FieldOwner)); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			p.mu.Lock()
			delete(p.written, want.Spec.Member) // read again next time
			p.mu.Unlock()
		}
		return false, fmt.Errorf("updating MemberSummary %s: %w", want.Name, err)
	}
	p.remember(next)
	return true, nil
}

func (p *summaryPublisher) remember(s *v1alpha1.MemberSummary) {
	p.mu.Lock()
	p.written[s.Spec.Member] = s
	p.mu.Unlock()
}

// observer runs on every replica of a sharded manager: for each RSP, it
// observes the workload in every member this replica holds and hands the
// observations to the publisher. It writes nothing else.
type observer struct {
	r    *Reconciler
	pub  *summaryPublisher
	ctrl controller.Controller
}

func (o *observer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := o.r
	rsp := &fedschedv1a1.ReplicaSchedulingPreference{}
	if err := r.host.Get(ctx, req.NamespacedName, rsp); err != nil {
		if apierrors.IsNotFound(err) {
			o.pub.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	w, err := r.loadWorkload(ctx, rsp)
	if err != nil {
		return ctrl.Result{}, err
	}
	kfcs, err := r.members.KubeFedClusters(ctx, labels.Everything())
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range kfcs {
		name := kfcs[i].Name
		if !r.members.HoldsMember(name) {
			continue
		}
		obs, err := r.observeHeld(ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", name)), name, rsp.Namespace, w, o.watches)
		if err != nil {
			return ctrl.Result{}, err
		}
		o.pub.set(name, toSummary(rsp.Namespace, rsp.Name, obs))
	}
	return ctrl.Result{RequeueAfter: r.opts.Resync}, nil
}

// watches adds the observer's own member watches (the rebalance
// controller's run only on the leader).
func (o *observer) watches(ctx context.Context, cluster string) error {
	return o.r.memberWatches(ctx, cluster, o.ctrl, "rebalance-observer")
}

// summaryReader is how the writer of RSPs sees a member it does not hold.
type summaryReader struct {
	reader    client.Reader
	namespace string
	clock     *summaryClock
}

// observation is the published observation of the workload in member, or
// Unknown (keeps what it holds) when no live holder published a fresh one:
// no summary, one written by a replica that does not hold the member now,
// a holder whose Lease stopped changing, a summary this replica has not
// seen change within staleAfter (on its own clock, now), or no entry for
// the workload yet.
func (s *summaryReader) observation(ctx context.Context, member, holder string, live bool, ns, name string, now time.Time) observation {
	unknown := observation{KubefedReady: true, Unknown: true}
	if s == nil {
		return unknown
	}
	sum := &v1alpha1.MemberSummary{}
	err := s.reader.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: summaryName(member)}, sum)
	switch {
	case apierrors.IsNotFound(err):
		s.clock.observe(summaryName(member), "", now)
		return s.unknown(member, unknown)
	case err != nil:
		return s.unknown(member, unknown)
	}
	s.clock.observe(sum.Name, sum.ResourceVersion, now)
	if holder == "" || !live || sum.Spec.Member != member || sum.Spec.Holder != holder ||
		!s.clock.fresh(sum.Name, sum.ResourceVersion, now) {
		return s.unknown(member, unknown)
	}
	metrics.ShardSummaryUnknown.WithLabelValues(member).Set(0)
	for _, w := range sum.Spec.Workloads {
		if w.Namespace == ns && w.Name == name {
			return fromSummary(w)
		}
	}
	return unknown
}

func (s *summaryReader) unknown(member string, o observation) observation {
	metrics.ShardSummaryUnknown.WithLabelValues(member).Set(1)
	return o
}

// summaryClock records, on this replica's clock, when it saw each
// summary's resourceVersion change (client-go leader election's rule for
// Leases: another process's timestamps are never compared with this
// clock). Fed by the summary informer and by every read, whichever sees
// a new resourceVersion first.
type summaryClock struct {
	// staleAfter: a summary whose last change this replica saw longer
	// ago than this is stale.
	staleAfter time.Duration

	mu   sync.Mutex
	seen map[string]seenSummary // by summary name
}

// seenSummary: rv as last seen, when, and whether that sight was a change
// (a summary already there when this replica first looked proves nothing
// about its age); revived: the change ended a stale (or unproven) sight.
type seenSummary struct {
	rv      string
	at      time.Time
	changed bool
	revived bool
}

func newSummaryClock(staleAfter time.Duration) *summaryClock {
	return &summaryClock{staleAfter: staleAfter, seen: map[string]seenSummary{}}
}

// observe records that rv ("" when absent) is what name holds now.
func (c *summaryClock) observe(name, rv string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.seen[name]
	switch {
	case !ok:
		c.seen[name] = seenSummary{rv: rv, at: now}
	case prev.rv != rv:
		c.changedLocked(name, rv, now, prev)
	}
}

// created records a summary that appeared after this replica started
// watching: a change.
func (c *summaryClock) created(name, rv string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev := c.seen[name]; prev.rv != rv || !prev.changed {
		c.changedLocked(name, rv, now, prev)
	}
}

func (c *summaryClock) changedLocked(name, rv string, now time.Time, prev seenSummary) {
	wasFresh := prev.changed && prev.rv != "" && now.Sub(prev.at) <= c.staleAfter
	c.seen[name] = seenSummary{rv: rv, at: now, changed: true, revived: !wasFresh}
}

// revived: rv, seen now (recorded if no one did yet), is a change that
// made a stale or unproven summary fresh again: the RSPs it lists need a
// pass even though only its renewal counter changed.
func (c *summaryClock) revived(name, rv string, now time.Time) bool {
	c.observe(name, rv, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seen[name]
	return s.rv == rv && s.revived
}

// forget drops a deleted summary.
func (c *summaryClock) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[name] = seenSummary{}
}

// fresh: this replica saw name change to rv within staleAfter before now.
func (c *summaryClock) fresh(name, rv string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.seen[name]
	return ok && s.changed && s.rv == rv && now.Sub(s.at) <= c.staleAfter
}

// handler feeds the clock from the summary informer.
func (c *summaryClock) handler(now func() time.Time) toolscache.ResourceEventHandler {
	rv := func(obj any) (string, string, bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		s, ok := obj.(*v1alpha1.MemberSummary)
		if !ok {
			return "", "", false
		}
		return s.Name, s.ResourceVersion, true
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			if name, v, ok := rv(obj); ok {
				if initial {
					c.observe(name, v, now())
				} else {
					c.created(name, v, now())
				}
			}
		},
		UpdateFunc: func(_, obj any) {
			if name, v, ok := rv(obj); ok {
				c.observe(name, v, now())
			}
		},
		DeleteFunc: func(obj any) {
			if name, _, ok := rv(obj); ok {
				c.forget(name)
			}
		},
	}
}
