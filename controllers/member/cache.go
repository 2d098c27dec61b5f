package member

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/api/v1alpha1"
	"github.com/fedfailover/fedfailover/internal/capacity"
	"github.com/fedfailover/fedfailover/internal/metrics"
	"github.com/fedfailover/fedfailover/internal/nodecond"
)

// Cache owns every member connection. Other controllers get a member's
// client or cache from it, or an error matching ErrNotConnected, and
// subscribe to EventSource to hear when members connect or disconnect.
type Cache struct {
	opts   Options
	scheme *runtime.Scheme // of the member clusters
	now    func() time.Time
	capi   capi
	// kubefed reads KubeFedClusters and Secrets in the kubefed namespace
	// (see KubeFedClusters).
	kubefed cluster.Cluster
	// shard is nil with sharding off (see sharding.go).
	shard *coordinator
	log   logr.Logger

	mu      sync.RWMutex
	members map[string]*memberState
	stopped bool

	subsMu   sync.Mutex
	subs     map[int]func(cluster string)
	mgmtSubs map[int]mgmtSub
	nextID   int

	// synced brings the member controller back as soon as a connection's
	// cache has synced.
	synced chan event.TypedGenericEvent[*kubefedv1beta1.KubeFedCluster]
}

func newCache(opts Options, scheme *runtime.Scheme) *Cache {
	return &Cache{opts: opts, scheme: scheme, now: time.Now, log: logr.Discard(),
		members: map[string]*memberState{}, subs: map[int]func(string){}, mgmtSubs: map[int]mgmtSub{},
		synced: make(chan event.TypedGenericEvent[*kubefedv1beta1.KubeFedCluster], 64)}
}

// onSynced returns the callback of a connection to kfc's member. It never
// blocks: if the channel is full, the next periodic look sees the sync.
func (c *Cache) onSynced(kfc *kubefedv1beta1.KubeFedCluster) func() {
	key := &kubefedv1beta1.KubeFedCluster{}
	key.Namespace, key.Name = kfc.Namespace, kfc.Name
	return func() {
		select {
		case c.synced <- event.TypedGenericEvent[*kubefedv1beta1.KubeFedCluster]{Object: key}:
		default:
		}
	}
}

// Start implements manager.Runnable: it tears every connection down when the
// manager stops.
func (c *Cache) Start(ctx context.Context) error {
	if c.capi.mgmt != nil {
		c.capi.mgmt.start(ctx)
		defer c.capi.mgmt.stopAll()
	}
	<-ctx.Done()
	c.mu.Lock()
	c.stopped = true
	var conns []*connection
	for _, m := range c.members {
		if m.conn != nil {
			conns = append(conns, m.conn)
			m.conn = nil
		}
	}
	c.mu.Unlock()
	for _, conn := range conns {
		conn.stop()
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the
// teardown must run on every replica.
func (c *Cache) NeedLeaderElection() bool { return false }

func (c *Cache) conn(cluster string) (*connection, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.members[cluster]
	if !ok {
		return nil, &NotConnectedError{Cluster: cluster, Reason: "not a joined member"}
	}
	if !m.connected() {
		return nil, &NotConnectedError{Cluster: cluster, Reason: m.reason}
	}
	return m.conn, nil
}

// GetClient returns a client for the member. Reads of Nodes, Pods,
// VolumeAttachments and CSIDrivers come from the member cache and are
// partial objects (see transform.go): Patch them, never Update them. Other
// kinds are read live.
func (c *Cache) GetClient(_ context.Context, cluster string) (client.Client, error) {
	conn, err := c.conn(cluster)
	if err != nil {
		return nil, err
	}
	return conn.client, nil
}

// GetReader returns the member's cache as a reader; it fails for kinds it
// does not cache. A pass over every object of a cached kind visits them
// (VisitCached) instead of listing copies.
func (c *Cache) GetReader(_ context.Context, cluster string) (client.Reader, error) {
	conn, err := c.conn(cluster)
	if err != nil {
		return nil, err
	}
	return conn.cache, nil
}

// PodUsage returns the member's pod requests summed per node (for
// capacity estimates without walking every pod), complete while connected.
func (c *Cache) PodUsage(_ context.Context, cluster string) (*capacity.Usage, error) {
	conn, err := c.conn(cluster)
	if err != nil {
		return nil, err
	}
	return conn.podUsage, nil
}

// Owners returns the member's workload owners (Deployments, ReplicaSets):
// from its cache once that has synced, live before (owners.go).
func (c *Cache) Owners(ctx context.Context, cluster string) (Owners, error) {
	conn, err := c.conn(cluster)
	if err != nil {
		return nil, err
	}
	return conn.owners(ctx), nil
}

// GetUncachedClient returns a client that always reads from the member's API
// server and returns whole objects.
func (c *Cache) GetUncachedClient(_ context.Context, cluster string) (client.Client, error) {
	conn, err := c.conn(cluster)
	if err != nil {
		return nil, err
	}
	return conn.uncached, nil
}

// ServerVersion returns the member API server's version seen at connect time.
func (c *Cache) ServerVersion(cluster string) (*version.Info, error) {
	conn, err := c.conn(cluster)
	if err != nil {
		return nil, err
	}
	v := *conn.version
	return &v, nil
}

// Connected reports whether the member has a healthy connection whose
// cache has synced.
func (c *Cache) Connected(cluster string) bool {
	_, err := c.conn(cluster)
	return err == nil
}

// EverConnected reports whether this process has had a synced connection
// to the member at least once.
func (c *Cache) EverConnected(cluster string) bool {
	return c.state(cluster).connectedOnce
}

// Unknown reports whether fedfailover's own view proves nothing about the
// member: this process never had a synced connection to it (right after a
// start, or while another replica owns it), or its API server answers and
// its cache is still listing. Such a member is unknown to every job, never
// failed. It is false while connected.
func (c *Cache) Unknown(cluster string) bool {
	m := c.state(cluster)
	return !m.connected() && (!m.connectedOnce || m.syncing())
}

// ConnectedClusters lists the connected members, sorted.
func (c *Cache) ConnectedClusters() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for name, m := range c.members {
		if m.connected() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Watcher is what a controller offers to add a watch (controller.Controller
// satisfies it).
type Watcher interface {
	Watch(src source.Source) error
}

// WatchInput describes a watch on a member's cache.
type WatchInput struct {
	// Name identifies the watch, so it is added once per connection.
	Name       string
	Watcher    Watcher
	Kind       client.Object
	Handler    handler.EventHandler
	Predicates []predicate.Predicate
}

// Watch adds a watch on the member's cache to a caller's controller, once
// per connection. After a reconnect the caller must call it again: doing so
// on the connect event from EventSource is the natural place.
func (c *Cache) Watch(ctx context.Context, cluster string, in WatchInput) error {
	conn, err := c.conn(cluster)
	if err != nil {
		return err
	}
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if _, ok := conn.watches[in.Name]; ok {
		return nil
	}
	h := in.Handler
	if _, nodes := in.Kind.(*corev1.Node); nodes {
		h = estimatesFirst{EventHandler: h, usage: conn.podUsage}
	}
	if err := in.Watcher.Watch(source.Kind(conn.cache, in.Kind, h, in.Predicates...)); err != nil {
		return fmt.Errorf("watching %s in member cluster %q: %w", in.Name, cluster, err)
	}
	conn.watches[in.Name] = struct{}{}
	return nil
}

// estimatesFirst forgets the member's remembered estimates before a
// watcher's Node handler queues its pass. Each informer handler runs in its
// own goroutine, so the connection's own node handler (which does the
// same) may run after the pass; without this the pass could get the
// estimate of before the change, and keep it until the next event.
type estimatesFirst struct {
	handler.EventHandler
	usage *capacity.Usage
}

func (e estimatesFirst) Create(ctx context.Context, ev event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	e.usage.NodesChanged()
	e.EventHandler.Create(ctx, ev, q)
}

func (e estimatesFirst) Update(ctx context.Context, ev event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if capacity.NodeUpdateChangesFit(ev.ObjectOld, ev.ObjectNew) {
		e.usage.NodesChanged()
	}
	e.EventHandler.Update(ctx, ev, q)
}

func (e estimatesFirst) Delete(ctx context.Context, ev event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	e.usage.NodesChanged()
	e.EventHandler.Delete(ctx, ev, q)
}

// EventSource returns a source that calls mapFn, and queues what it returns,
// each time a member connects, disconnects or changes its reason. Use it in
// WatchesRawSource instead of polling for ErrNotConnected.
func (c *Cache) EventSource(mapFn func(ctx context.Context, cluster string) []reconcile.Request) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		c.subsMu.Lock()
		id := c.nextID
		c.nextID++
		c.subs[id] = func(cluster string) {
			for _, r := range mapFn(ctx, cluster) {
				q.Add(r)
			}
		}
		c.subsMu.Unlock()
		context.AfterFunc(ctx, func() {
			c.subsMu.Lock()
			delete(c.subs, id)
			c.subsMu.Unlock()
		})
		return nil
	})
}

// RequestForCluster maps a member to a request named after it, for
// controllers that reconcile per member.
func RequestForCluster(_ context.Context, cluster string) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: cluster}}}
}

func (c *Cache) notify(cluster string) {
	c.subsMu.Lock()
	subs := make([]func(string), 0, len(c.subs))
	for _, f := range c.subs {
		subs = append(subs, f)
	}
	c.subsMu.Unlock()
	for _, f := range subs {
		f(cluster)
	}
}

// MemberStatuses summarises the named members for FailoverPolicy status, in
// the order given. Members never seen are reported as Pending.
func (c *Cache) MemberStatuses(ctx context.Context, names []string) []v1alpha1.MemberStatus {
	out := make([]v1alpha1.MemberStatus, 0, len(names))
	for _, name := range names {
		s := v1alpha1.MemberStatus{Name: name, Reason: ReasonPending, Message: "connection not attempted yet"}
		c.mu.RLock()
		m, ok := c.members[name]
		var conn *connection
		if ok {
			s.Connected, s.Reason, s.Message = m.connected(), m.reason, m.message
			if !m.lastProbe.IsZero() {
				t := metav1.NewTime(m.lastProbe)
				s.LastProbeTime = &t
			}
			if m.connected() {
				conn = m.conn
			}
		}
		c.mu.RUnlock()
		if conn != nil {
			s.ServerVersion = conn.version.GitVersion
			s.NodesReady, s.NodesTotal = countNodes(ctx, conn)
		}
		out = append(out, s)
	}
	return out
}

func countNodes(ctx context.Context, conn *connection) (ready, total int32) {
	// Read-only use: no need to copy thousands of Nodes.
	err := VisitCached(ctx, conn.cache, "", func(n *corev1.Node) {
		total++
		if nodecond.IsReady(n) {
			ready++
		}
	})
	if err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Counting member nodes failed", "error", err.Error())
		return 0, 0
	}
	return ready, total
}

// setCacheMetrics publishes the object counts of a connection.
func setCacheMetrics(cluster string, conn *connection) {
	for kind, n := range conn.counts {
		metrics.MemberCacheObjects.WithLabelValues(cluster, kind).Set(float64(n.Load()))
	}
}
