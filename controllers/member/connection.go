package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/connrotation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
	"github.com/fedfailover/fedfailover/internal/capacity"
)

// cachedKind is one kind held in every member cache.
type cachedKind struct {
	name      string
	obj       client.Object
	transform toolscache.TransformFunc
	newList   func() client.ObjectList
	// held is what the cache holds, when the transform makes another type
	// than obj's (Pods: *cachedpod.Pod); nil when it is obj's type.
	held client.Object
}

// heldType is the type of the objects the cache holds of k.
func (k cachedKind) heldType() reflect.Type {
	if k.held != nil {
		return reflect.TypeOf(k.held)
	}
	return reflect.TypeOf(k.obj)
}

func cachedKinds() []cachedKind {
	return []cachedKind{
		{"Node", &corev1.Node{}, transformNode, func() client.ObjectList { return &corev1.NodeList{} }, nil},
		{"Pod", &corev1.Pod{}, transformPod, func() client.ObjectList { return &corev1.PodList{} }, &cachedpod.Pod{}},
		{"VolumeAttachment", &storagev1.VolumeAttachment{}, transformVolumeAttachment,
			func() client.ObjectList { return &storagev1.VolumeAttachmentList{} }, nil},
		{"CSIDriver", &storagev1.CSIDriver{}, transformMeta, func() client.ObjectList { return &storagev1.CSIDriverList{} }, nil},
	}
}

// connection is one live connection to a member: its HTTP client, cache and
// clients. It is immutable once built, except for the counters and watches.
type connection struct {
	cfg        *rest.Config
	httpClient *http.Client
	dialer     *connrotation.Dialer // every TCP connection of this member
	fence      *writeFence          // admits the clients' writes
	cache      cache.Cache
	client     client.Client // cached reads for cachedKinds, live otherwise
	uncached   client.Client
	reviewer   client.Client // live and unfenced: access reviews only
	version    *version.Info
	// denials are the permissions the member refused this connection
	// (denials.go).
	denials *denials
	// credentials names the Secret of the token when it is not kubefed's
	// (the KubeFedCluster's AnnotationCredentialsSecret); empty otherwise.
	credentials string

	cancel context.CancelFunc
	done   chan struct{} // closed when the cache has stopped

	counts   map[string]*atomic.Int64  // objects in the cache, by kind
	progress []*kindProgress           // in cachedKinds order
	syncedAt atomic.Pointer[time.Time] // when every informer had synced

	mu      sync.Mutex
	watches map[string]struct{}

	// podUsage sums the cached pods' requests per node, from the pod
	// informer's events; complete once podUsageSynced. The node informer's
	// events tell it when its remembered estimates are out of date.
	podUsage       *capacity.Usage
	podUsageSynced func() bool

	// ownerInf are the workload owners' informers, for rebalance (owners.go).
	ownerInf ownerInformers

	lastWatchErr atomic.Pointer[string]
}

// dial builds a connection and starts its cache; onSynced is called once
// when the cache has synced. It does not wait for the sync: a first list
// may take minutes, and the reconciler watches its progress (syncStatus).
// On error nothing is left running.
func dial(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, o Options, fence *writeFence, den *denials, onSynced func()) (_ *connection, err error) {
	cfg, dialer := trackConnections(cfg)
	if o.WrapTransport != nil {
		cfg.Wrap(o.WrapTransport)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt} })
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return permissionTransport{rt: rt, denials: den} })
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating HTTP client: %w", err)
	}
	c := &connection{cfg: cfg, httpClient: httpClient, dialer: dialer, fence: fence, denials: den, done: make(chan struct{}),
		counts: map[string]*atomic.Int64{}, watches: map[string]struct{}{}, podUsage: capacity.NewUsage()}
	defer func() {
		if err != nil {
			c.stop()
		}
	}()

	cctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	// Reachability and TLS first: it needs no authorization.
	if c.version, err = serverVersion(cctx, cfg, httpClient); err != nil {
		return nil, fmt.Errorf("getting server version: %w", err)
	}

	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating REST mapper: %w", err)
	}
	live, err := client.NewWithWatch(cfg, client.Options{HTTPClient: httpClient, Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	// Then authentication and authorization, with the probe request itself.
	if err = probe(cctx, live); err != nil {
		return nil, fmt.Errorf("probing: %w", err)
	}

	byObject := map[client.Object]cache.ByObject{}
	byType := map[reflect.Type]*kindProgress{}
	for _, k := range cachedKinds() {
		p := &kindProgress{name: k.name}
		c.progress = append(c.progress, p)
		byType[reflect.TypeOf(k.obj)] = p
		byObject[k.obj] = cache.ByObject{Transform: countObjects(k.transform, &p.objects)}
	}
	for _, k := range ownerKinds() {
		byObject[k.obj] = cache.ByObject{Transform: k.transform}
	}
	c.cache, err = cache.New(cfg, cache.Options{
		HTTPClient: httpClient,
		Scheme:     scheme,
		Mapper:     mapper,
		ByObject:   byObject,
		// Reads of other kinds must not silently start informers.
		ReaderFailOnMissingInformer: true,
		DefaultTransform:            cache.TransformStripManagedFields(),
		NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			if p, ok := byType[reflect.TypeOf(obj)]; ok {
				lw = withProgress(lw, p)
			}
			return toolscache.NewSharedIndexInformer(lw, obj, resync, withControllerIndex(obj, idx))
		},
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			msg := err.Error()
			c.lastWatchErr.Store(&msg)
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	for i, k := range cachedKinds() {
		inf, err := c.cache.GetInformer(cctx, k.obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("creating %s informer: %w", k.name, err)
		}
		c.progress[i].informer = inf
		n := &atomic.Int64{}
		c.counts[k.name] = n
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { n.Add(1) },
			DeleteFunc: func(any) { n.Add(-1) },
		}); err != nil {
			return nil, fmt.Errorf("counting %ss: %w", k.name, err)
		}
		switch k.name {
		case "Pod":
			if err := c.keepPodUsage(inf); err != nil {
				return nil, err
			}
		case "Node":
			if err := c.forgetEstimatesOnNodeChanges(inf); err != nil {
				return nil, err
			}
		}
	}
	cached, err := client.NewWithWatch(cfg, client.Options{HTTPClient: httpClient, Scheme: scheme, Mapper: mapper,
		// Pods are read live: the cache holds cachedpod.Pods, which
		// controller-runtime's cached reader cannot hand out as corev1.Pods
		// (passes visit them instead: VisitCached).
		Cache: &client.CacheOptions{Reader: fallbackReader{cache: c.cache, live: live}, DisableFor: []client.Object{&corev1.Pod{}}}})
	if err != nil {
		return nil, fmt.Errorf("creating cached client: %w", err)
	}
	// Every write to the member, from either client, goes through the fence.
	c.client, c.uncached = memberClient{WithWatch: fence.fenced(cached), cache: c.cache}, fence.fenced(live)
	c.reviewer = live

	// The cache outlives this reconcile: it stops in stop().
	cacheCtx, cacheCancel := context.WithCancel(context.Background())
	c.cancel = cacheCancel
	go func() {
		defer close(c.done)
		_ = c.cache.Start(cacheCtx)
	}()
	go func() {
		// Returns false once the connection is stopped.
		// Synced includes podUsage: it has seen every listed pod.
		if c.cache.WaitForCacheSync(cacheCtx) && toolscache.WaitForCacheSync(cacheCtx.Done(), c.podUsageSynced) {
			now := time.Now()
			c.syncedAt.Store(&now)
			onSynced()
		}
	}()
	return c, nil
}

// forgetEstimatesOnNodeChanges tells podUsage of every node change an
// estimate reads (capacity.NodeFitChanged): its remembered estimates are
// made again. A status heartbeat keeps them.
func (c *connection) forgetEstimatesOnNodeChanges(inf cache.Informer) error {
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.podUsage.NodesChanged() },
		UpdateFunc: func(oldObj, newObj any) {
			if capacity.NodeUpdateChangesFit(oldObj, newObj) {
				c.podUsage.NodesChanged()
			}
		},
		DeleteFunc: func(any) { c.podUsage.NodesChanged() },
	})
	if err != nil {
		return fmt.Errorf("following node changes: %w", err)
	}
	return nil
}

// keepPodUsage feeds the pod informer's events into podUsage.
func (c *connection) keepPodUsage(inf cache.Informer) error {
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*cachedpod.Pod); ok {
				c.podUsage.Add(p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, okO := oldObj.(*cachedpod.Pod)
			n, okN := newObj.(*cachedpod.Pod)
			if okO && okN {
				c.podUsage.Update(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*cachedpod.Pod); ok {
				c.podUsage.Delete(p)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("summing pod requests: %w", err)
	}
	c.podUsageSynced = reg.HasSynced
	return nil
}

// syncStatus reports how far the cache's first sync has come.
func (c *connection) syncStatus() syncStatus {
	st := syncStatus{synced: c.syncedAt.Load() != nil, kinds: make([]kindSync, 0, len(c.progress))}
	for _, p := range c.progress {
		k := kindSync{name: p.name, synced: p.informer.HasSynced(), objects: p.objects.Load()}
		if !k.synced {
			st.bytes += p.bytes.Load()
		}
		st.kinds = append(st.kinds, k)
	}
	return st
}

// bytesRead is what every informer's list and watch requests have read.
func (c *connection) bytesRead() int64 {
	return c.sum(func(p *kindProgress) int64 { return p.bytes.Load() })
}

// brokenStreams counts the informers' list and watch requests that failed
// or broke off since the connection was made (kindProgress.broken).
func (c *connection) brokenStreams() int64 {
	return c.sum(func(p *kindProgress) int64 { return p.broken.Load() })
}

// sum adds one count over every cached kind.
func (c *connection) sum(count func(*kindProgress) int64) int64 {
	var n int64
	for _, p := range c.progress {
		n += count(p)
	}
	return n
}

// watchErr is the last error of an informer's list or watch, if any.
func (c *connection) watchErr() string {
	if p := c.lastWatchErr.Load(); p != nil {
		return *p
	}
	return ""
}

// stop stops the cache, waits for it and closes every TCP connection to the
// member, so no goroutine of this connection outlives it. Never call it with
// a lock held: it waits for the informers.
func (c *connection) stop() {
	c.fence.close(0)
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	utilnet.CloseIdleConnectionsFor(c.httpClient.Transport)
	// Idle or not: a request still in flight elsewhere must not keep the
	// connection (and its HTTP/2 reader goroutine) alive.
	c.dialer.CloseAll()
}

// trackConnections returns a copy of cfg whose connections all go through
// one dialer, so stop can close them. Sharing client-go's transport cache
// across connections is thereby avoided too.
func trackConnections(cfg *rest.Config) (*rest.Config, *connrotation.Dialer) {
	cfg = rest.CopyConfig(cfg)
	base := cfg.Dial
	if t, ok := cfg.Transport.(*http.Transport); ok {
		t = t.Clone()
		base = t.DialContext
		cfg.Transport = t
	}
	if base == nil {
		base = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	d := connrotation.NewDialer(base)
	if t, ok := cfg.Transport.(*http.Transport); ok {
		t.DialContext = d.DialContext
	} else {
		cfg.Dial = d.DialContext
	}
	return cfg, d
}

func serverVersion(ctx context.Context, cfg *rest.Config, httpClient *http.Client) (*version.Info, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	raw, err := dc.RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var v version.Info
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decoding /version: %w", err)
	}
	return &v, nil
}

// probe lists one Node's metadata: it checks reachability, the token and the
// permission fedfailover needs most, and costs the API server almost nothing.
func probe(ctx context.Context, c client.Client) error {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NodeList"))
	return c.List(ctx, l, client.Limit(1))
}

// fallbackReader reads the cached kinds from the cache and the rest live,
// the workload owners too (Owners reads their cache once it has synced).
type fallbackReader struct {
	cache cache.Cache
	live  client.Reader
}

func (r fallbackReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if isOwnerKind(obj) {
		return r.live.Get(ctx, key, obj, opts...)
	}
	err := r.cache.Get(ctx, key, obj, opts...)
	if errors.As(err, new(*cache.ErrResourceNotCached)) {
		return r.live.Get(ctx, key, obj, opts...)
	}
	return err
}

func (r fallbackReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if isOwnerKind(list) {
		return r.live.List(ctx, list, opts...)
	}
	err := r.cache.List(ctx, list, opts...)
	if errors.As(err, new(*cache.ErrResourceNotCached)) {
		return r.live.List(ctx, list, opts...)
	}
	return err
}
