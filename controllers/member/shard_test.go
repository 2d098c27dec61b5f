package member

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fedfailover/fedfailover/internal/shard"
	"github.com/fedfailover/fedfailover/test/testenv"
)

// Test timings: a hold ends 2.5s after the last renewal; another replica
// waits 4s after it last saw the Lease change.
const (
	testLeaseDuration = 4 * time.Second
	testRenewDeadline = 2500 * time.Millisecond
	testRetryPeriod   = 500 * time.Millisecond
)

func init() { log.SetLogger(logr.Discard()) }

var testMembers = []string{"member-a", "member-b", "member-c", "member-d"}

type replica struct {
	id     string
	c      *coordinator
	cancel context.CancelFunc
	done   chan struct{}
	proxy  *proxy // nil when connected directly
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// startReplica runs a coordinator for testMembers. With viaProxy its Lease
// client goes through a forwarder the test can cut.
func startReplica(t *testing.T, cfg *rest.Config, ns, id string, viaProxy bool) *replica {
	t.Helper()
	return startReplicaWith(t, cfg, ns, id, viaProxy, func(string, bool) bool { return true })
}

// startReplicaWith is startReplica with the coordinator's onChange.
func startReplicaWith(t *testing.T, cfg *rest.Config, ns, id string, viaProxy bool, onChange func(string, bool) bool) *replica {
	t.Helper()
	r := &replica{id: id, done: make(chan struct{})}
	if viaProxy {
		cfg, r.proxy = cutOff(t, cfg)
	}
	c, err := newCoordinator(ShardOptions{Namespace: ns, Identity: id, Config: cfg,
		LeaseDuration: testLeaseDuration, RenewDeadline: testRenewDeadline, RetryPeriod: testRetryPeriod},
		func(context.Context) ([]string, error) { return testMembers, nil },
		onChange)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		_ = c.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// monitor samples every replica's HoldsMember and fails the test if two
// replicas ever hold the same member at once. It records, per member, when
// each replica was first and last seen holding it.
type monitor struct {
	mu        sync.Mutex
	violation string
	first     map[string]map[string]time.Time // member -> replica -> first seen holding
	last      map[string]map[string]time.Time // member -> replica -> last seen holding
	stop      chan struct{}
	done      chan struct{}
}

func watch(replicas []*replica) *monitor {
	m := &monitor{first: map[string]map[string]time.Time{}, last: map[string]map[string]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			now := time.Now()
			m.mu.Lock()
			for _, member := range testMembers {
				var holders []string
				for _, r := range replicas {
					if r.c.HoldsMember(member) {
						holders = append(holders, r.id)
						if m.first[member] == nil {
							m.first[member], m.last[member] = map[string]time.Time{}, map[string]time.Time{}
						}
						if _, ok := m.first[member][r.id]; !ok {
							m.first[member][r.id] = now
						}
						m.last[member][r.id] = now
					}
				}
				if len(holders) > 1 && m.violation == "" {
					m.violation = fmt.Sprintf("%s held by %v at once", member, holders)
				}
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// reset forgets who held what so far (the violation check goes on).
func (m *monitor) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.first, m.last = map[string]map[string]time.Time{}, map[string]map[string]time.Time{}
}

func (m *monitor) close(t *testing.T) {
	t.Helper()
	close(m.stop)
	<-m.done
	if m.violation != "" {
		t.Error(m.violation)
	}
}

// owners maps each member to the replicas holding it right now.
func owners(replicas []*replica) map[string][]string {
	out := map[string][]string{}
	for _, member := range testMembers {
		out[member] = nil
		for _, r := range replicas {
			if r.c.HoldsMember(member) {
				out[member] = append(out[member], r.id)
			}
		}
	}
	return out
}

func ids(replicas []*replica) []string {
	var out []string
	for _, r := range replicas {
		out = append(out, r.id)
	}
	sort.Strings(out)
	return out
}

// waitOwnedOnce waits until each member is held by exactly the replica
// rendezvous hashing picks among replicas, and returns when that happened.
func waitOwnedOnce(t *testing.T, replicas []*replica, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	var got map[string][]string
	for time.Now().Before(deadline) {
		got = owners(replicas)
		ok := true
		for member, hs := range got {
			if len(hs) != 1 || hs[0] != shard.Owner(member, ids(replicas)) {
				ok = false
			}
		}
		if ok {
			return time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("members not each held once by their rendezvous owner within %s: %v", within, got)
	return time.Time{}
}

func newShardNamespace(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shard-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// Three replicas, four members: each member is held by exactly one
// replica, the one rendezvous hashing picks, and its Lease names it. A
// replica that stops hands its members over well within the lease duration.
func TestShardOwnsEachMemberOnceAndHandsOverOnStop(t *testing.T) {
	cfg := testenv.Start(t)
	ns := newShardNamespace(t, cfg)
	rs := []*replica{
		startReplica(t, cfg, ns, "replica-1", false),
		startReplica(t, cfg, ns, "replica-2", false),
		startReplica(t, cfg, ns, "replica-3", false),
	}
	mon := watch(rs)
	// Replicas first see each other's Leases as fresh: holds settle within
	// about one lease duration.
	waitOwnedOnce(t, rs, 3*testLeaseDuration)

	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, member := range testMembers {
		l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), memberLeaseName(member), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := shard.Owner(member, ids(rs)); l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != want {
			t.Errorf("Lease of %s names holder %v, want %s", member, l.Spec.HolderIdentity, want)
		}
	}

	// Stop the replica owning the most members.
	victim := rs[0]
	for _, r := range rs {
		if len(r.c.Held()) > len(victim.c.Held()) {
			victim = r
		}
	}
	moved := victim.c.Held()
	if len(moved) == 0 {
		t.Fatal("no replica holds a member")
	}
	stopped := time.Now()
	victim.stop()
	var rest []*replica
	for _, r := range rs {
		if r != victim {
			rest = append(rest, r)
		}
	}
	// Released Leases and a deleted peer Lease: no need to wait for expiry.
	took := waitOwnedOnce(t, rest, testLeaseDuration).Sub(stopped)
	t.Logf("members %v handed over in %s", moved, took)
	mon.close(t)
}

// A replica handing a member over whose write is still in flight when its
// hold ends leaves the member's Lease to expire instead of releasing it: the
// next owner must not act before that write can have landed. The members
// whose writes all returned are released as before.
func TestShardReleaseWaitsForWritesInFlight(t *testing.T) {
	cfg := testenv.Start(t)
	ns := newShardNamespace(t, cfg)
	const stuck = "member-b"
	r := startReplicaWith(t, cfg, ns, "replica-1", false, func(member string, held bool) bool {
		return held || member != stuck
	})
	poll(t, 3*testLeaseDuration, "replica-1 holds every member", func() error {
		if h := r.c.Held(); len(h) != len(testMembers) {
			return fmt.Errorf("holds %v", h)
		}
		return nil
	})
	r.stop()

	cs := kubernetes.NewForConfigOrDie(cfg)
	for _, member := range testMembers {
		l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), memberLeaseName(member), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		switch {
		case member == stuck && (holder != "replica-1" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != int32(testLeaseDuration/time.Second)):
			t.Errorf("Lease of %s (a write in flight) after the hand-over: holder %q, duration %v s; want it left to expire (replica-1, %v)",
				member, holder, ptr.Deref(l.Spec.LeaseDurationSeconds, 0), testLeaseDuration)
		case member != stuck && holder != "":
			t.Errorf("Lease of %s (writes drained) still names holder %q after the hand-over, want released", member, holder)
		}
	}
}

// A replica cut off from the API server stops holding its members before
// any other replica can hold them, and they are taken over within the lease
// duration (plus the peers' and acquisition's retry periods).
func TestShardReplicaCutOffStopsBeforeTakeover(t *testing.T) {
	cfg := testenv.Start(t)
	ns := newShardNamespace(t, cfg)
	rs := []*replica{
		startReplica(t, cfg, ns, "replica-1", true),
		startReplica(t, cfg, ns, "replica-2", true),
		startReplica(t, cfg, ns, "replica-3", true),
	}
	mon := watch(rs)
	waitOwnedOnce(t, rs, 3*testLeaseDuration)
	// Cut the replica holding the most members.
	cut, others := rs[0], []*replica{}
	for _, r := range rs {
		if len(r.c.Held()) > len(cut.c.Held()) {
			cut = r
		}
	}
	for _, r := range rs {
		if r != cut {
			others = append(others, r)
		}
	}
	moved := cut.c.Held()

	// From here on, first and last holds are those after the cut.
	mon.reset()
	cutAt := time.Now()
	cut.proxy.cut()

	// It stops at its renew deadline at the latest...
	poll(t, testRenewDeadline+testRetryPeriod, "cut replica drops its holds", func() error {
		if h := cut.c.Held(); len(h) > 0 {
			return fmt.Errorf("still holds %v", h)
		}
		return nil
	})
	stoppedAfter := time.Since(cutAt)
	// ...and the others take its members over once its Leases expired:
	// a lease duration after they last saw them change, plus a retry
	// period or two to notice (and slack for a loaded machine).
	takeover := testLeaseDuration + 4*testRetryPeriod
	waitOwnedOnce(t, others, takeover+2*time.Second)
	mon.close(t)

	mon.mu.Lock()
	defer mon.mu.Unlock()
	for _, member := range moved {
		lastCut := mon.last[member][cut.id]
		for _, r := range others {
			first, ok := mon.first[member][r.id]
			if !ok {
				continue
			}
			if !first.After(lastCut) {
				t.Errorf("%s: %s held it at %s, before %s stopped at %s", member, r.id, first.Sub(cutAt), cut.id, lastCut.Sub(cutAt))
			}
			if d := first.Sub(cutAt); d > takeover {
				t.Errorf("%s: taken over %s after the cut, want within %s", member, d, takeover)
			}
			t.Logf("%s: %s stopped %s after the cut, %s took over after %s", member, cut.id, lastCut.Sub(cutAt), r.id, first.Sub(cutAt))
		}
	}
	t.Logf("cut replica dropped every hold within %s", stoppedAfter)
}

// A replica whose renewals fail from the start never holds anything.
func TestShardUnreachableAPIServerHoldsNothing(t *testing.T) {
	cfg := testenv.Start(t)
	ns := newShardNamespace(t, cfg)
	closed := rest.CopyConfig(cfg)
	closed.Host = "https://" + closedAddr(t)
	r := startReplica(t, closed, ns, "replica-closed", false)
	ok := startReplica(t, cfg, ns, "replica-ok", false)
	waitOwnedOnce(t, []*replica{ok}, 3*testLeaseDuration)
	if h := r.c.Held(); len(h) > 0 {
		t.Errorf("replica with a closed API port holds %v", h)
	}
}

func poll(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, within, err)
}

func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// proxy forwards TCP to the API server until cut: then it refuses new
// connections and closes the open ones.
type proxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	isCut bool
}

// cutOff returns a copy of cfg that reaches the API server through a proxy.
func cutOff(t *testing.T, cfg *rest.Config) (*rest.Config, *proxy) {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l}
	t.Cleanup(p.cut)
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", u.Host)
			if err != nil {
				_ = in.Close()
				continue
			}
			p.mu.Lock()
			if p.isCut {
				p.mu.Unlock()
				_ = in.Close()
				_ = out.Close()
				return
			}
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + l.Addr().String()
	// The serving certificate names 127.0.0.1 or localhost, not the port.
	return c, p
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.isCut {
		return
	}
	p.isCut = true
	_ = p.l.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}
