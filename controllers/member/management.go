package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kubefedv1beta1 "sigs.k8s.io/kubefed/pkg/apis/core/v1beta1"

	"github.com/fedfailover/fedfailover/internal/capimap"
	"github.com/fedfailover/fedfailover/internal/contract"
	"github.com/fedfailover/fedfailover/internal/mgmtconfig"
)

// A member's Cluster API objects live in the host unless its KubeFedCluster
// carries contract.AnnotationCAPIManagementCluster: then they are read from
// the management cluster whose kubeconfig the named Secret (in the kubefed
// namespace, next to the member's token Secret) holds. One connection per
// Secret, shared by the members that name it: a cache of Machines and
// Clusters (watched, so a Machine change brings the members' passes), a
// live client for the re-read before every destructive act and for the
// Machine deletion, and a probe. A management cluster that cannot be
// reached, or whose credentials or permissions fail, is a ManagementError:
// no Machine evidence for those members, never a fence.

// ManagementError says why the Cluster API objects of a member whose
// KubeFedCluster names a management cluster cannot be read now. No Machine
// evidence is taken for the member meanwhile. It is not an ErrNoCAPICluster.
type ManagementError struct {
	Member string
	// Secret is "namespace/name" of the kubeconfig Secret (the annotation's
	// value when it is not a valid name).
	Secret string
	Err    error
}

func (e *ManagementError) Error() string {
	return fmt.Sprintf("fencing evidence unavailable: management cluster of member %s (kubeconfig Secret %s): %v", e.Member, e.Secret, e.Err)
}

func (e *ManagementError) Unwrap() error { return e.Err }

// MachineClients reach the API server that holds a member's Machines: the
// host's, or its management cluster's.
type MachineClients struct {
	// Live reads from that API server itself (the re-read before a
	// destructive act, MachineHealthChecks).
	Live client.Reader
	// Writer deletes Machines (fencing.requestMachineDeletion).
	Writer client.Client
	// Management is the "namespace/name" of the management cluster's
	// kubeconfig Secret; empty for the host.
	Management string
}

// management keeps one connection per kubeconfig Secret.
type management struct {
	kubefed client.Reader // the kubefed namespace's cache (Secrets, KubeFedClusters)
	ns      string
	scheme  *runtime.Scheme
	opts    Options
	log     logr.Logger
	// onMachine is called for every Machine event of a Secret's cache,
	// onHealth when its connection becomes (un)available.
	onMachine func(secret string, m *clusterv1.Machine)
	onHealth  func(secret string)

	mu      sync.Mutex
	ctx     context.Context // the manager's; nil before Start
	entries map[string]*mgmtEntry
}

// mgmtEntry is one Secret's connection, or its last failure.
type mgmtEntry struct {
	mu         sync.Mutex // serialises connecting
	conn       *mgmtConn
	failedHash string
	failedErr  error
	failedAt   time.Time
}

// mgmtConn is a connection to one management cluster.
type mgmtConn struct {
	hash   string // of the kubeconfig it was built from
	cache  cache.Cache
	live   client.Client
	cancel context.CancelFunc
	done   chan struct{} // closed when the cache has stopped

	mu    sync.Mutex
	err   error // why it is unavailable now; nil while healthy
	fails int
}

func newManagement(kubefed client.Reader, ns string, scheme *runtime.Scheme, opts Options) *management {
	return &management{kubefed: kubefed, ns: ns, scheme: scheme, opts: opts, log: logr.Discard(),
		onMachine: func(string, *clusterv1.Machine) {}, onHealth: func(string) {}, entries: map[string]*mgmtEntry{}}
}

// start lets connections be made; they stop with ctx.
func (m *management) start(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctx = ctx
}

// stopAll stops every connection (the manager stops).
func (m *management) stopAll() {
	m.mu.Lock()
	entries := m.entries
	m.entries = map[string]*mgmtEntry{}
	m.ctx = nil
	m.mu.Unlock()
	for _, e := range entries {
		e.mu.Lock()
		if e.conn != nil {
			e.conn.stop()
			e.conn = nil
		}
		e.mu.Unlock()
	}
}

// errNotStarted: reads before the manager started.
var errNotStarted = errors.New("the manager has not started yet")

// get returns the connection of a Secret, connecting when the Secret is
// new or its kubeconfig changed. A connection that cannot be used now is
// returned with the error saying why (nil connection when none was made).
func (m *management) get(ctx context.Context, secret string) (*mgmtConn, error) {
	s := &corev1.Secret{}
	if err := m.kubefed.Get(ctx, types.NamespacedName{Namespace: m.ns, Name: secret}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the Secret %s/%s does not exist", m.ns, secret)
		}
		return nil, fmt.Errorf("reading Secret %s/%s: %w", m.ns, secret, err)
	}
	data := kubeconfigOf(s)
	if data == nil {
		return nil, fmt.Errorf("the Secret %s/%s has no %q key holding a kubeconfig", m.ns, secret, contract.ManagementKubeconfigKeys)
	}
	hash := mgmtconfig.Hash(data)
	m.mu.Lock()
	root := m.ctx
	e := m.entries[secret]
	if e == nil && root != nil {
		e = &mgmtEntry{}
		m.entries[secret] = e
	}
	m.mu.Unlock()
	if root == nil {
		return nil, errNotStarted
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil && e.conn.hash == hash {
		return e.conn, e.conn.health()
	}
	if e.conn != nil {
		// The Secret changed (rotated credentials, another cluster): the old
		// connection's objects are not this cluster's.
		e.conn.stop()
		e.conn = nil
	}
	if e.failedHash == hash && time.Since(e.failedAt) < m.opts.MaxRetryPeriod {
		return nil, e.failedErr
	}
	conn, err := m.dial(root, secret, data, hash)
	if err != nil {
		e.failedHash, e.failedErr, e.failedAt = hash, err, time.Now()
		m.log.Info("Management cluster unavailable", "secret", secret, "reason", err.Error())
		return nil, err
	}
	e.failedHash, e.failedErr = "", nil
	e.conn = conn
	m.log.Info("Connected to management cluster", "secret", secret)
	go m.probeLoop(root, secret, conn)
	return conn, nil
}

// kubeconfigOf is the Secret's kubeconfig (contract.ManagementKubeconfigKeys).
func kubeconfigOf(s *corev1.Secret) []byte {
	for _, k := range contract.ManagementKubeconfigKeys {
		if v := s.Data[k]; len(v) > 0 {
			return v
		}
	}
	return nil
}

// dial connects: a first live list of Machines (reachability, credentials,
// permission and the CRD at once), then the cache of Machines and Clusters,
// synced within ConnectTimeout. On error nothing is left running.
func (m *management) dial(root context.Context, secret string, data []byte, hash string) (*mgmtConn, error) {
	cfg, err := mgmtconfig.RESTConfig(data, mgmtconfig.Options{QPS: m.opts.QPS, Burst: m.opts.Burst,
		UserAgent: "fedfailover-management", Timeout: m.opts.ConnectTimeout, AllowInsecure: m.opts.AllowInsecureEndpoints})
	if err != nil {
		return nil, err
	}
	if m.opts.WrapTransport != nil {
		cfg.Wrap(m.opts.WrapTransport)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	live, err := client.New(cfg, client.Options{HTTPClient: httpClient, Scheme: m.scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	cctx, cancel := context.WithTimeout(root, m.opts.ConnectTimeout)
	defer cancel()
	if err := probeManagement(cctx, live); err != nil {
		return nil, err
	}
	ca, err := cache.New(cfg, cache.Options{HTTPClient: httpClient, Scheme: m.scheme, Mapper: mapper,
		ByObject:                    map[client.Object]cache.ByObject{&clusterv1.Machine{}: {}, &clusterv1.Cluster{}: {}},
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	if err := capimap.IndexMachines(cctx, ca); err != nil {
		return nil, fmt.Errorf("indexing Machines: %w", err)
	}
	inf, err := ca.GetInformer(cctx, &clusterv1.Machine{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("creating the Machine informer: %w", err)
	}
	if _, err := ca.GetInformer(cctx, &clusterv1.Cluster{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("creating the Cluster informer: %w", err)
	}
	onMachine := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if mach, ok := obj.(*clusterv1.Machine); ok {
			m.onMachine(secret, mach)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onMachine,
		UpdateFunc: func(_, n any) { onMachine(n) }, DeleteFunc: onMachine}); err != nil {
		return nil, fmt.Errorf("watching Machines: %w", err)
	}
	runCtx, runCancel := context.WithCancel(root)
	conn := &mgmtConn{hash: hash, cache: ca, live: live, cancel: runCancel, done: make(chan struct{})}
	go func() {
		defer close(conn.done)
		_ = ca.Start(runCtx)
	}()
	if !ca.WaitForCacheSync(cctx) {
		conn.stop()
		return nil, fmt.Errorf("its Machines and Clusters were not listed within %s", m.opts.ConnectTimeout)
	}
	return conn, nil
}

// probeManagement lists one Machine: it checks reachability, the
// credentials, the Cluster API CRDs and the read permission at once.
func probeManagement(ctx context.Context, c client.Reader) error {
	err := c.List(ctx, &clusterv1.MachineList{}, client.Limit(1))
	switch {
	case err == nil:
		return nil
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
		return errors.New("it has no Cluster API Machine CRD (cluster.x-k8s.io/v1beta2)")
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("its credentials are refused (401 Unauthorized): %w", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("its credentials may not list Machines (403 Forbidden; they need get, list and watch on machines and clusters.cluster.x-k8s.io): %w", err)
	}
	return fmt.Errorf("listing Machines: %w", err)
}

// probeLoop probes a connection every ProbePeriod: 401 and 403 make it
// unavailable at once, other failures after FailureThreshold in a row, one
// success available again. A Secret that no KubeFedCluster names any more
// is disconnected.
func (m *management) probeLoop(root context.Context, secret string, conn *mgmtConn) {
	t := time.NewTicker(m.opts.ProbePeriod)
	defer t.Stop()
	for {
		select {
		case <-conn.done:
			return
		case <-root.Done():
			return
		case <-t.C:
		}
		if !m.referenced(root, secret) {
			m.drop(secret, conn)
			return
		}
		ctx, cancel := context.WithTimeout(root, m.opts.ProbeTimeout)
		err := probeManagement(ctx, conn.live)
		cancel()
		if conn.observe(err, m.opts.FailureThreshold) {
			m.log.Info("Management cluster availability changed", "secret", secret, "available", err == nil)
			m.onHealth(secret)
		}
	}
}

// referenced: some KubeFedCluster still names the Secret (true when that
// cannot be read: the connection stays).
func (m *management) referenced(ctx context.Context, secret string) bool {
	var list kubefedv1beta1.KubeFedClusterList
	if err := m.kubefed.List(ctx, &list, client.InNamespace(m.ns)); err != nil {
		return true
	}
	return slices.ContainsFunc(list.Items, func(k kubefedv1beta1.KubeFedCluster) bool {
		s, set, _ := contract.DecodeCAPIManagementCluster(k.Annotations)
		return set && s == secret
	})
}

// drop stops the Secret's connection if it is still conn.
func (m *management) drop(secret string, conn *mgmtConn) {
	m.mu.Lock()
	e := m.entries[secret]
	m.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn == conn {
		conn.stop()
		e.conn = nil
		m.log.Info("Disconnected from management cluster no KubeFedCluster names", "secret", secret)
	}
}

// observe records a probe's result; it reports whether availability changed.
func (c *mgmtConn) observe(err error, threshold int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.err == nil
	switch {
	case err == nil:
		c.fails, c.err = 0, nil
	case apierrors.IsUnauthorized(err), apierrors.IsForbidden(err):
		c.fails, c.err = threshold, err
	default:
		c.fails++
		if c.fails >= threshold {
			c.err = fmt.Errorf("%d probes in a row failed, the last: %w", c.fails, err)
		}
	}
	return was != (c.err == nil)
}

func (c *mgmtConn) health() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *mgmtConn) stop() {
	c.cancel()
	<-c.done
}

// machineSource is where a member's Cluster API objects are read: the
// host's cache, or its management cluster's (see ManagementError).
func (c *Cache) machineSource(ctx context.Context, kfc *kubefedv1beta1.KubeFedCluster) (capimap.Reader, MachineClients, error) {
	secret, set, err := contract.DecodeCAPIManagementCluster(kfc.Annotations)
	if err != nil {
		return capimap.Reader{}, MachineClients{}, &ManagementError{Member: kfc.Name, Secret: kfc.Annotations[contract.AnnotationCAPIManagementCluster], Err: err}
	}
	if !set {
		if !c.capi.enabled {
			return capimap.Reader{}, MachineClients{}, ErrCAPIUnavailable
		}
		return c.capi.host, MachineClients{Live: c.capi.hostLive, Writer: c.capi.hostWriter}, nil
	}
	ref := c.opts.Namespace + "/" + secret
	conn, err := c.capi.mgmt.get(ctx, secret)
	if err != nil {
		return capimap.Reader{}, MachineClients{}, &ManagementError{Member: kfc.Name, Secret: ref, Err: err}
	}
	return capimap.Reader{Reader: conn.cache, Indexed: true}, MachineClients{Live: conn.live, Writer: conn.live, Management: ref}, nil
}

// MachineClients returns the clients of the API server that holds the
// member's Machines; a *ManagementError when its management cluster cannot
// be used now, ErrCAPIUnavailable for a member of the host without Cluster
// API.
func (c *Cache) MachineClients(ctx context.Context, member string) (MachineClients, error) {
	kfc, err := c.KubeFedCluster(ctx, member)
	if err != nil {
		return MachineClients{}, err
	}
	_, mc, err := c.machineSource(ctx, kfc)
	return mc, err
}

// ManagementEventSource calls mapFn for each member whose management
// cluster became available or unavailable and, with machines, for each
// member a Machine event of its management cluster may concern (the member
// whose Cluster has the Machine's cluster name, else every member naming
// that cluster).
func (c *Cache) ManagementEventSource(machines bool, mapFn func(ctx context.Context, cluster string) []reconcile.Request) source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		c.subsMu.Lock()
		id := c.nextID
		c.nextID++
		c.mgmtSubs[id] = mgmtSub{machines: machines, fn: func(cluster string) {
			for _, r := range mapFn(ctx, cluster) {
				q.Add(r)
			}
		}}
		c.subsMu.Unlock()
		context.AfterFunc(ctx, func() {
			c.subsMu.Lock()
			delete(c.mgmtSubs, id)
			c.subsMu.Unlock()
		})
		return nil
	})
}

type mgmtSub struct {
	machines bool
	fn       func(cluster string)
}

// notifyManagement tells the subscribers about the members of a Secret.
func (c *Cache) notifyManagement(secret string, m *clusterv1.Machine) {
	members := c.membersOfManagement(secret, m)
	c.subsMu.Lock()
	subs := make([]mgmtSub, 0, len(c.mgmtSubs))
	for _, s := range c.mgmtSubs {
		subs = append(subs, s)
	}
	c.subsMu.Unlock()
	for _, s := range subs {
		if m != nil && !s.machines {
			continue
		}
		for _, member := range members {
			s.fn(member)
		}
	}
}

// membersOfManagement lists the members naming the Secret; for a Machine,
// only the one whose Cluster has its cluster name when there is one.
func (c *Cache) membersOfManagement(secret string, m *clusterv1.Machine) []string {
	var list kubefedv1beta1.KubeFedClusterList
	if err := c.kubefed.GetClient().List(context.Background(), &list, client.InNamespace(c.opts.Namespace)); err != nil {
		return nil
	}
	var all, named []string
	for i := range list.Items {
		k := &list.Items[i]
		if s, set, _ := contract.DecodeCAPIManagementCluster(k.Annotations); !set || s != secret {
			continue
		}
		all = append(all, k.Name)
		name := k.Name
		if ref, set, err := contract.DecodeCAPICluster(k.Annotations); err == nil && set {
			name = ref.Name
		}
		if m != nil && name == m.Spec.ClusterName {
			named = append(named, k.Name)
		}
	}
	if len(named) > 0 {
		return named
	}
	return all
}
