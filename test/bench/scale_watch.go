package bench

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fedschedv1a1 "sigs.k8s.io/kubefed/pkg/apis/scheduling/v1alpha1"

	"github.com/fedfailover/fedfailover/internal/scheme"
)

// The decision latencies are timed from watches, on the bench's (the
// host's) clock: each object is stamped when the watch delivers it, a few
// milliseconds after the API server wrote it, as fedfailover's own watches
// deliver it. Polling instead over-stated each end by up to a poll period.

// scWatch watches one kind in one lab cluster (in ns when given, limited by
// fs when given) and calls on with every object delivered (added or
// updated) and the time it arrived. It returns once the initial list is
// delivered; the watch ends with ctx.
func scWatch(ctx context.Context, cfg *rest.Config, obj client.Object, ns string, fs fields.Selector, on func(client.Object, time.Time)) error {
	s, err := scheme.New()
	if err != nil {
		return err
	}
	opts := cache.Options{Scheme: s}
	if fs != nil {
		opts.ByObject = map[client.Object]cache.ByObject{obj: {Field: fs}}
	}
	if ns != "" {
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	}
	c, err := cache.New(cfg, opts)
	if err != nil {
		return fmt.Errorf("watch cache: %w", err)
	}
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return fmt.Errorf("watching %T: %w", obj, err)
	}
	deliver := func(o any) {
		if co, ok := o.(client.Object); ok {
			on(co, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { deliver(o) }, UpdateFunc: func(_, o any) { deliver(o) },
	}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("watching %T: not synced: %w", obj, context.Cause(ctx))
	}
	return nil
}

// restConfig is the lab cluster's REST config.
func (b *scBench) restConfig(cluster string) (*rest.Config, error) {
	st, err := b.l.State()
	if err != nil {
		return nil, err
	}
	cs := st.Cluster(cluster)
	if cs == nil {
		return nil, fmt.Errorf("no cluster %q in the lab", cluster)
	}
	return clientcmd.BuildConfigFromFlags("", cs.Kubeconfig)
}

// What each decision latency is timed from and to (table and BENCH_JSON).
const (
	scTaintBasis = "from the earlier of the Machine evidence + the Lease silence window and the later of the evidence and " +
		"the Node first seen not Ready (bench watch, host clock) + notReadyFor, to the out-of-service taint seen (bench watch)"
	scShiftBasis = "from the workload's pod first seen Unschedulable (bench watch, host clock) + " +
		"capacityExhaustedAfter, to the RSP's spec.clusters change seen (bench watch)"
)

// scTaintClock times one powered-off node. fedfailover counts notReadyFor
// from when it first sees the node not Ready (host clock); the bench does
// the same from its own watch, never from the Node's lastTransitionTime
// (whole seconds, truncated: up to 1 s earlier than the transition, which
// over-stated the latency by as much).
type scTaintClock struct {
	notReadyFor time.Duration
	// silence is fedfailover's Lease silence window for the lab's nodes:
	// with evidence, a node counts lost once its Lease stayed unchanged
	// that long (the power-off stops the kubelet as the evidence comes).
	silence time.Duration
	mu      sync.Mutex
	seen    time.Time // the node first delivered not Ready
	tainted time.Time // the out-of-service taint first delivered
	done    chan struct{}
}

func newTaintClock(notReadyFor, silence time.Duration) *scTaintClock {
	return &scTaintClock{notReadyFor: notReadyFor, silence: silence, done: make(chan struct{})}
}

func (c *scTaintClock) observe(o client.Object, at time.Time) {
	n, ok := o.(*corev1.Node)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := rcReadyCondition(n); r != nil && r.Status != corev1.ConditionTrue && c.seen.IsZero() {
		c.seen = at
	}
	if rcHasOOSTaint(n) && c.tainted.IsZero() {
		c.tainted = at
		close(c.done)
	}
}

// latency is the seconds from the loss rule turning true to the taint:
// the earlier of the evidence rule (the Machine evidence + the Lease
// silence window) and the NotReady rule (the later of the evidence and the
// first not-Ready sighting + notReadyFor), as fedfailover detects by
// evidence first.
func (c *scTaintClock) latency(evidence time.Time) (float64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tainted.IsZero() {
		return 0, fmt.Errorf("not tainted out-of-service")
	}
	complete := evidence.Add(c.silence)
	if !c.seen.IsZero() && !c.seen.After(c.tainted) {
		notReady := evidence
		if lost := c.seen.Add(c.notReadyFor); lost.After(notReady) {
			notReady = lost
		}
		if notReady.Before(complete) {
			complete = notReady
		}
	}
	return c.tainted.Sub(complete).Seconds(), nil
}

// scShiftClock times the RSPs of an exhausted member. fedfailover counts
// capacityExhaustedAfter from when it first sees a pod of the workload
// Unschedulable (host clock), so the start is the bench's own first
// sighting of one + capacityExhaustedAfter; the end is the watch
// delivering the RSP's spec.clusters changed.
type scShiftClock struct {
	after   time.Duration
	mu      sync.Mutex
	before  map[string]map[string]fedschedv1a1.ClusterPreferences // RSP -> spec.clusters before
	unsched map[string]time.Time                                  // workload -> a pod first seen Unschedulable
	shifted map[string]time.Time
}

func newShiftClock(after time.Duration) *scShiftClock {
	return &scShiftClock{after: after, before: map[string]map[string]fedschedv1a1.ClusterPreferences{},
		unsched: map[string]time.Time{}, shifted: map[string]time.Time{}}
}

func (c *scShiftClock) expect(rsp string, clusters map[string]fedschedv1a1.ClusterPreferences) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.before[rsp] = clusters
}

func (c *scShiftClock) observePod(o client.Object, at time.Time) {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Status.Phase != corev1.PodPending {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			if app := p.Labels["app"]; c.unsched[app].IsZero() {
				c.unsched[app] = at
			}
		}
	}
}

func (c *scShiftClock) observeRSP(o client.Object, at time.Time) {
	r, ok := o.(*fedschedv1a1.ReplicaSchedulingPreference)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old, expected := c.before[r.Name]
	if _, done := c.shifted[r.Name]; !expected || done || reflect.DeepEqual(old, r.Spec.Clusters) {
		return
	}
	c.shifted[r.Name] = at
}

// progress says how many RSPs shifted and whether all did.
func (c *scShiftClock) progress() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.shifted) == len(c.before), fmt.Sprintf("%d/%d shifted, %d seen Unschedulable", len(c.shifted), len(c.before), len(c.unsched))
}

// samples are the seconds from each rule turning true to its shift; an RSP
// not shifted, or never seen Unschedulable, is missing.
func (c *scShiftClock) samples() ([]float64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []float64
	missing := 0
	for name := range c.before {
		at, ok1 := c.shifted[name]
		since, ok2 := c.unsched[name]
		if !ok1 || !ok2 {
			missing++
			continue
		}
		out = append(out, at.Sub(since.Add(c.after)).Seconds())
	}
	return out, missing
}
