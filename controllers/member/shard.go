package member

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/defaults"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/shard"
)

// The shard Leases (one per replica, one per member) live in the manager's
// own namespace: a hand-written Role (config/rbac/shard_role.yaml and the
// chart), as for the leader election Lease.

// Lease names and the label of peer Leases.
const (
	peerLeasePrefix   = "fedfailover-peer-"
	memberLeasePrefix = "fedfailover-member-"
	peerLabel         = contract.LabelShardPeer
	memberLabel       = contract.LabelShardMember
)

// ShardOptions shard members across manager replicas. Sharding is on when
// Namespace is set; off, one replica connects to every member as before.
type ShardOptions struct {
	// Namespace holds the peer and member Leases.
	Namespace string
	// Identity names this replica in the Leases (default: hostname plus a
	// random suffix, so a restarted pod is a new peer).
	Identity string
	// LeaseDuration is how long, on another replica's clock, a Lease that
	// it sees unchanged still counts as held (default 15s).
	LeaseDuration time.Duration
	// RenewDeadline is how long after its last successful renewal a
	// replica still acts on a member (default 10s). It must be shorter than
	// LeaseDuration: the difference is the safety margin for clock rate
	// differences and writes in flight.
	RenewDeadline time.Duration
	// RetryPeriod is how often Leases are renewed and peers re-read
	// (default 2s).
	RetryPeriod time.Duration
	// Config reaches the host API server for the Leases (default: the
	// manager's).
	Config *rest.Config
}

// Default shard Lease timings.
const (
	defaultShardLeaseDuration = 15 * time.Second
	defaultShardRenewDeadline = 10 * time.Second
)

// Enabled: members are sharded across replicas.
func (o ShardOptions) Enabled() bool { return o.Namespace != "" }

func (o ShardOptions) withDefaults() (ShardOptions, error) {
	defaults.Set(&o.LeaseDuration, defaultShardLeaseDuration)
	defaults.Set(&o.RenewDeadline, defaultShardRenewDeadline)
	defaults.Set(&o.RetryPeriod, 2*time.Second)
	if o.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return o, fmt.Errorf("getting hostname for the shard identity: %w", err)
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.Identity = strings.ToLower(host) + "-" + hex.EncodeToString(b)
	}
	// A hold must outlast a missed renewal plus the margin HoldsMember keeps.
	if o.LeaseDuration <= o.RenewDeadline || o.RenewDeadline <= 2*o.RetryPeriod || o.LeaseDuration%time.Second != 0 {
		return o, fmt.Errorf("shard lease timings: need lease duration (%s, whole seconds) > renew deadline (%s) > 2 x retry period (%s)",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
	return o, nil
}

// coordinator announces this replica with a peer Lease, computes the members
// it owns by rendezvous hashing over the live peers, and holds one Lease per
// owned member. It reads and writes the Leases directly, with client-go
// leader election's rules: another holder's Lease is judged only by when
// this replica saw it change (on its own clock) and the Lease's own
// duration; every write is an optimistic update (resourceVersion), so two
// replicas never both win the same Lease. onChange hears every start and end
// of a hold, outside any lock; an end is reported before the Lease is
// released, and for an end onChange reports whether every write sent to the
// member under the hold has returned (a Lease is released only then).
type coordinator struct {
	o        ShardOptions
	leases   coordinationv1client.LeasesGetter
	members  func(ctx context.Context) ([]string, error)
	onChange func(member string, held bool) (drained bool)
	now      func() time.Time

	mu        sync.Mutex
	peerLease *coordinationv1.Lease // as last written by us
	peerRenew time.Time             // when that write was sent
	peers     map[string]seenLease  // other replicas' peer Leases, by Lease name
	seen      map[string]seenLease  // member Leases, by Lease name
	held      map[string]*hold      // by member
}

// seenLease is a Lease as this replica last read it, and since when (its
// clock) it has been unchanged.
type seenLease struct {
	lease    coordinationv1.Lease
	holder   string
	duration time.Duration // the Lease's own
	obs      shard.Observation
}

// hold is a member Lease this replica holds.
type hold struct {
	lease     *coordinationv1.Lease // as last written by us
	lastRenew time.Time             // when that write was sent
}

func newCoordinator(o ShardOptions, members func(context.Context) ([]string, error), onChange func(string, bool) bool) (*coordinator, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(o.Config)
	// A hung request must not outlive the renew deadline.
	cfg.Timeout = o.RenewDeadline / 2
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(cfg, "fedfailover-shard"))
	if err != nil {
		return nil, fmt.Errorf("creating Lease client: %w", err)
	}
	return &coordinator{o: o, leases: cs.CoordinationV1(), members: members, onChange: onChange, now: time.Now,
		peers: map[string]seenLease{}, seen: map[string]seenLease{}, held: map[string]*hold{}}, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica takes part.
func (c *coordinator) NeedLeaderElection() bool { return false }

// Start runs the loop until ctx is done, then hands every member over and
// withdraws the peer Lease so the others take over at once.
func (c *coordinator) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("shard").WithValues("identity", c.o.Identity)
	ctx = ctrl.LoggerInto(ctx, log)
	log.Info("Sharding members across replicas", "namespace", c.o.Namespace,
		"leaseDuration", c.o.LeaseDuration, "renewDeadline", c.o.RenewDeadline, "retryPeriod", c.o.RetryPeriod)
	go c.watchdog(ctx)
	t := time.NewTicker(c.o.RetryPeriod)
	defer t.Stop()
	for {
		c.tick(ctx)
		select {
		case <-ctx.Done():
			c.shutdown(ctrl.LoggerInto(context.Background(), log))
			return nil
		case <-t.C:
		}
	}
}

// watchdog drops every hold past its renew deadline even while a tick is
// stuck on a slow API server.
func (c *coordinator) watchdog(ctx context.Context) {
	t := time.NewTicker(c.o.RetryPeriod / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.dropExpired()
	}
}

func (c *coordinator) dropExpired() {
	now := c.now()
	for _, m := range c.heldNames() {
		if !c.holdValid(m, now, 0) {
			c.drop(m, metrics.LeaseLost)
		}
	}
}

// tick renews the peer Lease, reads the peers and member Leases, and
// renews, acquires or hands over member Leases to match the members this
// replica owns.
func (c *coordinator) tick(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx)
	if err := c.renewPeer(ctx); err != nil {
		log.Info("Renewing the peer Lease failed", "error", err.Error())
	}
	if err := c.readLeases(ctx); err != nil {
		log.Info("Reading shard Leases failed", "error", err.Error())
	}
	live := c.livePeers()
	metrics.ShardPeers.Set(float64(len(live)))
	members, err := c.members(ctx)
	if err != nil {
		// Keep the current holds: they stay fenced by their own renewals.
		log.V(1).Info("Listing members failed", "error", err.Error())
		members = c.heldNames()
	}
	owned := map[string]bool{}
	for _, m := range shard.Owned(c.o.Identity, members, live) {
		owned[m] = true
	}

	// Expired or no longer ours: stop first, then release.
	c.dropExpired()
	for _, m := range c.heldNames() {
		if !owned[m] {
			c.release(ctx, m)
		}
	}
	var wg sync.WaitGroup
	for m := range owned {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c.isHeld(m) {
				c.renewMember(ctx, m)
			} else {
				c.acquireMember(ctx, m)
			}
		}()
	}
	wg.Wait()
	c.setOwnedMetric()
}

func (c *coordinator) peerLeaseName() string { return shard.LeaseName(peerLeasePrefix, c.o.Identity) }

func memberLeaseName(member string) string { return shard.LeaseName(memberLeasePrefix, member) }

// renewPeer writes this replica's peer Lease; peerRenew is the send time of
// the last write that succeeded.
func (c *coordinator) renewPeer(ctx context.Context) error {
	start := c.now()
	c.mu.Lock()
	l := c.peerLease.DeepCopy()
	c.mu.Unlock()
	leases := c.leases.Leases(c.o.Namespace)
	spec := c.spec(start, start)
	var err error
	if l == nil {
		l, err = leases.Get(ctx, c.peerLeaseName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.peerLeaseName(), Namespace: c.o.Namespace,
				Labels: map[string]string{peerLabel: "true"}}, Spec: spec}
			l, err = leases.Create(ctx, l, metav1.CreateOptions{})
		} else if err == nil {
			l.Spec = spec
			l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
	} else {
		l.Spec = spec
		l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.peerLease = nil // read it again next time
		return fmt.Errorf("writing peer Lease %s: %w", c.peerLeaseName(), err)
	}
	c.peerLease, c.peerRenew = l, start
	return nil
}

// spec is this replica's holder record.
func (c *coordinator) spec(acquired, renewed time.Time) coordinationv1.LeaseSpec {
	return coordinationv1.LeaseSpec{HolderIdentity: ptr.To(c.o.Identity),
		LeaseDurationSeconds: ptr.To(int32(c.o.LeaseDuration / time.Second)),
		AcquireTime:          &metav1.MicroTime{Time: acquired},
		RenewTime:            &metav1.MicroTime{Time: renewed}}
}

// readLeases lists the peer and member Leases and records, on this
// replica's clock, when each one last changed. A peer Lease unchanged for
// ten of its durations is deleted: its replica is gone for good.
func (c *coordinator) readLeases(ctx context.Context) error {
	leases := c.leases.Leases(c.o.Namespace)
	peers, err := leases.List(ctx, metav1.ListOptions{LabelSelector: peerLabel + "=true"})
	if err != nil {
		return fmt.Errorf("listing peer Leases: %w", err)
	}
	members, err := leases.List(ctx, metav1.ListOptions{LabelSelector: memberLabel + "=true"})
	if err != nil {
		return fmt.Errorf("listing member Leases: %w", err)
	}
	now := c.now()
	c.mu.Lock()
	c.peers = observeLeases(c.peers, peers.Items, c.o.LeaseDuration, now)
	c.seen = observeLeases(c.seen, members.Items, c.o.LeaseDuration, now)
	var gone []coordinationv1.Lease
	for name, p := range c.peers {
		if name != c.peerLeaseName() && !shard.Fresh(p.obs, 10*p.duration, now) {
			gone = append(gone, p.lease)
		}
	}
	c.mu.Unlock()
	for _, l := range gone {
		err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("Deleting a stale peer Lease failed", "lease", l.Name, "error", err.Error())
		}
	}
	return nil
}

// observeLeases returns the new observations of items. The resourceVersion
// changes with every write: it is the Lease's own record, compared for
// equality only, never with a clock.
func observeLeases(prev map[string]seenLease, items []coordinationv1.Lease, def time.Duration, now time.Time) map[string]seenLease {
	out := make(map[string]seenLease, len(items))
	for _, l := range items {
		d := def
		if s := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); s > 0 {
			d = time.Duration(s) * time.Second
		}
		out[l.Name] = seenLease{lease: l, holder: ptr.Deref(l.Spec.HolderIdentity, ""), duration: d,
			obs: shard.Observe(prev[l.Name].obs, l.ResourceVersion, now)}
	}
	return out
}

// livePeers are the identities that own members: the peers whose Lease
// changed within its duration, and this replica while its own peer Lease
// renewal is within the renew deadline.
func (c *coordinator) livePeers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	var live []string
	if shard.HoldValid(c.peerRenew, now, c.o.RenewDeadline, 0) {
		live = append(live, c.o.Identity)
	}
	for name, p := range c.peers {
		if name != c.peerLeaseName() && p.holder != "" && p.holder != c.o.Identity && shard.Fresh(p.obs, p.duration, now) {
			live = append(live, p.holder)
		}
	}
	slices.Sort(live)
	return slices.Compact(live)
}

// acquireMember takes member's Lease when it is free: absent, released, or
// unchanged for its whole duration since this replica first saw it so.
func (c *coordinator) acquireMember(ctx context.Context, member string) {
	name := memberLeaseName(member)
	c.mu.Lock()
	s, ok := c.seen[name]
	c.mu.Unlock()
	sent := c.now()
	leases := c.leases.Leases(c.o.Namespace)
	var (
		l   *coordinationv1.Lease
		err error
	)
	if !ok {
		l, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.o.Namespace,
			Labels: map[string]string{memberLabel: "true"}}, Spec: c.spec(sent, sent)}, metav1.CreateOptions{})
	} else {
		if s.holder != "" && s.holder != c.o.Identity && shard.Fresh(s.obs, s.duration, sent) {
			return // held by another replica, as far as this one can tell
		}
		l = s.lease.DeepCopy()
		transitions := ptr.Deref(l.Spec.LeaseTransitions, 0)
		if s.holder != c.o.Identity {
			transitions++
		}
		l.Spec = c.spec(sent, sent)
		l.Spec.LeaseTransitions = ptr.To(transitions)
		// Optimistic: fails if anyone wrote the Lease since it was read.
		l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			ctrl.LoggerFrom(ctx).V(1).Info("Acquiring the member Lease failed", "cluster", member, "error", err.Error())
		}
		return
	}
	c.mu.Lock()
	c.held[member] = &hold{lease: l, lastRenew: sent}
	c.mu.Unlock()
	metrics.ShardLeaseTransitions.WithLabelValues(member, metrics.LeaseAcquired).Inc()
	_ = c.onChange(member, true)
}

// renewMember writes the held Lease again. A conflict means someone else
// wrote it: the hold ends at once. Other errors are retried until the
// renew deadline passes (tick then drops the hold).
func (c *coordinator) renewMember(ctx context.Context, member string) {
	c.mu.Lock()
	h := c.held[member]
	var l *coordinationv1.Lease
	if h != nil {
		l = h.lease.DeepCopy()
	}
	c.mu.Unlock()
	if l == nil {
		return
	}
	sent := c.now()
	acquired := sent
	if l.Spec.AcquireTime != nil {
		acquired = l.Spec.AcquireTime.Time
	}
	transitions := l.Spec.LeaseTransitions
	l.Spec = c.spec(acquired, sent)
	l.Spec.LeaseTransitions = transitions
	updated, err := c.leases.Leases(c.o.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		ctrl.LoggerFrom(ctx).Info("Member Lease written by someone else: stopping", "cluster", member, "error", err.Error())
		c.drop(member, metrics.LeaseLost)
		return
	case err != nil:
		ctrl.LoggerFrom(ctx).Info("Renewing the member Lease failed", "cluster", member, "error", err.Error())
		return
	}
	c.mu.Lock()
	if c.held[member] == h {
		h.lease, h.lastRenew = updated, sent
	}
	c.mu.Unlock()
}

// drop ends the hold on member and tells onChange, which stops the
// member's work. It returns the Lease as last written, for a release, and
// whether the member's writes all returned.
func (c *coordinator) drop(member, transition string) (*coordinationv1.Lease, bool) {
	c.mu.Lock()
	h := c.held[member]
	delete(c.held, member)
	c.mu.Unlock()
	if h == nil {
		return nil, true
	}
	metrics.ShardLeaseTransitions.WithLabelValues(member, transition).Inc()
	drained := c.onChange(member, false)
	c.setOwnedMetric()
	return h.lease, drained
}

// release hands member over: its work stops first (drop), then the Lease
// is marked free so the next owner need not wait for it to expire. A write
// still in flight could land after the next owner started acting: then the
// Lease is left to expire, which gives the write a whole lease duration.
func (c *coordinator) release(ctx context.Context, member string) {
	l, drained := c.drop(member, metrics.LeaseReleased)
	if l == nil {
		return
	}
	if !drained {
		ctrl.LoggerFrom(ctx).Info("A write to the member was still in flight: its Lease is left to expire instead of released", "cluster", member)
		return
	}
	l = l.DeepCopy()
	now := c.now()
	l.Spec.HolderIdentity = nil
	l.Spec.LeaseDurationSeconds = ptr.To(int32(1))
	l.Spec.RenewTime = &metav1.MicroTime{Time: now}
	if _, err := c.leases.Leases(c.o.Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		// It expires on its own.
		ctrl.LoggerFrom(ctx).V(1).Info("Releasing the member Lease failed", "cluster", member, "error", err.Error())
	}
}

func (c *coordinator) heldNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.held))
	for m := range c.held {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

func (c *coordinator) isHeld(member string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held[member] != nil
}

func (c *coordinator) holdValid(member string, now time.Time, margin time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.held[member]
	return h != nil && shard.HoldValid(h.lastRenew, now, c.o.RenewDeadline, margin)
}

func (c *coordinator) setOwnedMetric() {
	c.mu.Lock()
	n := len(c.held)
	c.mu.Unlock()
	metrics.ShardOwnedMembers.Set(float64(n))
}

// HoldsMember is true while this replica holds member's Lease with margin
// (one retry period) before its renew deadline: time for the write the
// caller is about to send.
func (c *coordinator) HoldsMember(member string) bool {
	return c.holdValid(member, c.now(), c.o.RetryPeriod)
}

// Held lists the members held right now (see HoldsMember), sorted.
func (c *coordinator) Held() []string {
	var out []string
	for _, m := range c.heldNames() {
		if c.HoldsMember(m) {
			out = append(out, m)
		}
	}
	return out
}

// shutdown hands every member over and deletes the peer Lease.
func (c *coordinator) shutdown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.o.RenewDeadline)
	defer cancel()
	for _, m := range c.heldNames() {
		c.release(ctx, m)
	}
	if err := c.leases.Leases(c.o.Namespace).Delete(ctx, c.peerLeaseName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		ctrl.LoggerFrom(ctx).Info("Deleting the peer Lease failed", "error", err.Error())
	}
	metrics.ShardOwnedMembers.Set(0)
}

// holderOf is the replica that holds member's Lease as this replica last
// read it, and whether that Lease changed within its duration on this
// replica's clock (its holder may still be renewing it). This replica's
// own holds count while valid.
func (c *coordinator) holderOf(member string) (string, bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.held[member]; h != nil {
		return c.o.Identity, shard.HoldValid(h.lastRenew, now, c.o.RenewDeadline, 0)
	}
	s, ok := c.seen[memberLeaseName(member)]
	if !ok || s.holder == "" {
		return "", false
	}
	return s.holder, shard.Fresh(s.obs, s.duration, now)
}
