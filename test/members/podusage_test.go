package members

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fedfailover/fedfailover/controllers/member"
	"github.com/fedfailover/fedfailover/internal/capacity"
)

// TestPodUsageFollowsTheMember: the per-node sums the member cache keeps
// (what rebalance estimates capacity from) count the pods listed at connect
// time and follow pods created, finished and deleted afterwards, agreeing
// with an estimate walking the cached pods each time.
func TestPodUsageFollowsTheMember(t *testing.T) {
	f := env(t)
	opts := testOptions()
	m := f.members["alpha"]
	ctx := context.Background()
	node := schedulableNode(t, m, "alpha-usage", nil)
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}
	bound := func(name string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Spec: *spec.DeepCopy()}
		p.Spec.NodeName = node.Name
		p.Spec.Containers[0].Image = "registry.example/app:1"
		must(t, m.client.Create(ctx, p))
		t.Cleanup(func() { _ = m.client.Delete(context.Background(), p, client.GracePeriodSeconds(0)) })
		return p
	}
	before := []*corev1.Pod{bound("listed-0"), bound("listed-1"), bound("listed-2")}

	h := startManager(t, f, opts)
	f.join(t, "alpha", "alpha", nil)
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)
	// 4 cores, 500m each: 8 fit on an empty node.
	wantFits := func(want int64) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%d replicas fit", want), func() error {
			usage, err := h.cache.PodUsage(ctx, "alpha")
			if err != nil {
				return err
			}
			rd, err := h.cache.GetReader(ctx, "alpha")
			if err != nil {
				return err
			}
			var ptrs []*corev1.Node
			if err := member.VisitCached(ctx, rd, "", func(n *corev1.Node) { ptrs = append(ptrs, n) }); err != nil {
				return err
			}
			// The sums counted again from every cached pod, as they are now.
			walkedUsage := capacity.NewUsage()
			if err := member.VisitCached(ctx, rd, "", walkedUsage.Add); err != nil {
				return err
			}
			kept, walked := usage.Fit(ptrs, spec), walkedUsage.Fit(ptrs, spec)
			if kept.Replicas != want || walked.Replicas != want {
				return errorf("kept sums fit %d, walking the cache fits %d, want %d (%d nodes, ineligible %v, free %v)", kept.Replicas, walked.Replicas, want, len(ptrs), walked.Ineligible, walked.Free)
			}
			return nil
		})
	}
	wantFits(5) // the three listed at connect time
	bound("added-0")
	wantFits(4)
	done := before[0].DeepCopy()
	must(t, m.client.Get(ctx, client.ObjectKeyFromObject(done), done))
	done.Status.Phase = corev1.PodSucceeded
	must(t, m.client.Status().Update(ctx, done))
	wantFits(5)
	must(t, m.client.Delete(ctx, before[1], client.GracePeriodSeconds(0)))
	wantFits(6)
}

// TestRememberedEstimatesFollowTheMemberNodes: the estimates a member's
// Usage remembers between changes are made again after every node change
// an estimate reads, through the real member cache and its node informer:
// a taint put on and taken off on the member's API server changes the
// estimate within the poll, while a status heartbeat keeps the remembered
// one (the nodes are not listed again).
func TestRememberedEstimatesFollowTheMemberNodes(t *testing.T) {
	ctx := context.Background()
	h, m, node, spec := oneNodeEstimate(t, "alpha-estimate")
	listed := 0
	estimate := func() (capacity.Estimate, error) { return memberEstimate(ctx, h, "alpha", spec, &listed) }
	wantFits := func(want int64, after string) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%d replicas fit after %s", want, after), func() error {
			est, err := estimate()
			if err != nil {
				return err
			}
			if est.Replicas != want {
				return errorf("%d fit (ineligible %v)", est.Replicas, est.Ineligible)
			}
			return nil
		})
	}
	// cachedAt waits until the member cache holds the node at rv.
	cachedAt := func(rv string) {
		t.Helper()
		eventually(t, 10*time.Second, "the cache holds the node at resourceVersion "+rv, func() error {
			rd, err := h.cache.GetReader(ctx, "alpha")
			if err != nil {
				return err
			}
			n := &corev1.Node{}
			if err := rd.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
				return err
			}
			if n.ResourceVersion != rv {
				return errorf("cached at %s", n.ResourceVersion)
			}
			return nil
		})
	}
	wantFits(8, "connecting")

	must(t, m.client.Get(ctx, client.ObjectKeyFromObject(node), node))
	node.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(node.Status.Conditions[0].LastHeartbeatTime.Add(time.Minute))
	must(t, m.client.Status().Update(ctx, node))
	cachedAt(node.ResourceVersion)
	before := listed
	wantFits(8, "a heartbeat")
	if listed != before {
		t.Fatalf("a status heartbeat made the estimate again (nodes listed %d more times)", listed-before)
	}

	node.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	must(t, m.client.Update(ctx, node))
	wantFits(0, "a NoSchedule taint")
	node.Spec.Taints = nil
	must(t, m.client.Update(ctx, node))
	wantFits(8, "the taint's removal")
}

// oneNodeEstimate makes a schedulable node in member alpha and a template
// that only it can take (4 cores, 500m each: 8 fit), starts a manager and
// waits until alpha is connected.
func oneNodeEstimate(t *testing.T, nodeName string) (*harness, *memberEnv, *corev1.Node, *corev1.PodSpec) {
	t.Helper()
	f := env(t)
	m := f.members["alpha"]
	node := schedulableNode(t, m, nodeName, map[string]string{"estimate-test": nodeName})
	spec := &corev1.PodSpec{NodeSelector: node.Labels, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}
	h := startManager(t, f, testOptions())
	f.join(t, "alpha", "alpha", nil)
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)
	return h, m, node, spec
}

// memberEstimate is the member's kept estimate for spec, as rebalance asks
// for it: the Usage's own, its nodes listed from the member cache (counted
// in listed) only when it makes one.
func memberEstimate(ctx context.Context, h *harness, cluster string, spec *corev1.PodSpec, listed *int) (capacity.Estimate, error) {
	usage, err := h.cache.PodUsage(ctx, cluster)
	if err != nil {
		return capacity.Estimate{}, err
	}
	rd, err := h.cache.GetReader(ctx, cluster)
	if err != nil {
		return capacity.Estimate{}, err
	}
	return usage.Estimate(spec, func() ([]*corev1.Node, error) {
		*listed++
		var ptrs []*corev1.Node
		err := member.VisitCached(ctx, rd, "", func(n *corev1.Node) { ptrs = append(ptrs, n) })
		return ptrs, err
	})
}

// queueWatcher starts a watch's source on a queue of its own, as a
// controller would.
type queueWatcher struct {
	ctx context.Context
	q   workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func (w queueWatcher) Watch(src source.Source) error { return src.Start(w.ctx, w.q) }

// A pass queued by a Node watch gets the estimate of after the change: the
// watch's handler makes the member's Usage forget its kept estimates before
// it queues (member.Cache.Watch), whichever of the informer's handlers runs
// first. The handler here asks for the estimate itself, at the moment a
// pass would be queued, at every taint flip it sees; before the fix the
// connection's own handler often ran second and the estimate was the old
// one.
func TestANodeWatchGetsTheEstimateOfAfterTheChange(t *testing.T) {
	ctx := t.Context()
	h, m, node, spec := oneNodeEstimate(t, "alpha-order")

	type seen struct {
		rv      string
		tainted bool
		fits    int64
		err     error
	}
	got := make(chan seen, 256)
	listed := 0
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	err := h.cache.Watch(ctx, "alpha", member.WatchInput{Name: "order-test", Watcher: queueWatcher{ctx: ctx, q: q}, Kind: &corev1.Node{},
		Handler: handler.Funcs{UpdateFunc: func(ctx context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			n, ok := e.ObjectNew.(*corev1.Node)
			if !ok || n.Name != node.Name {
				return
			}
			est, err := memberEstimate(ctx, h, "alpha", spec, &listed)
			got <- seen{rv: n.ResourceVersion, tainted: len(n.Spec.Taints) > 0, fits: est.Replicas, err: err}
		}}})
	must(t, err)
	// flip taints or clears the node's taint and waits (a bounded while)
	// for the watch to see that version; it reports whether it did.
	flip := func(tainted bool) bool {
		t.Helper()
		must(t, m.client.Get(ctx, client.ObjectKeyFromObject(node), node))
		node.Spec.Taints = nil
		if tainted {
			node.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
		}
		must(t, m.client.Update(ctx, node))
		deadline := time.After(5 * time.Second)
		for {
			select {
			case s := <-got:
				want := int64(8)
				if s.tainted {
					want = 0
				}
				if s.err != nil || s.fits != want {
					t.Fatalf("the handler saw the node at %s (tainted=%v) and got %d fitting (%v); want %d", s.rv, s.tainted, s.fits, s.err, want)
				}
				if s.rv == node.ResourceVersion {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	// The watch's handler is added in the background: flip until it sees one.
	tainted := false
	eventually(t, 30*time.Second, "the watch sees a taint flip", func() error {
		tainted = !tainted
		if !flip(tainted) {
			return errorf("not seen")
		}
		return nil
	})
	observed := 0
	for range 10 {
		tainted = !tainted
		if flip(tainted) {
			observed++
		}
	}
	if observed < 5 {
		t.Fatalf("the watch saw %d of 10 taint flips; want at least 5 to prove anything", observed)
	}
	t.Logf("the watch saw %d of 10 taint flips, each with the estimate of after it", observed)
}

// schedulableNode is a Ready node with 4 cores, 8Gi and room for 20 pods,
// labelled with labels, that takes pods.
func schedulableNode(t *testing.T, m *memberEnv, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	node := readyNode(t, m, name)
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("20")}
	must(t, m.client.Status().Update(ctx, node))
	// Without a node lifecycle controller, the not-ready taint admission
	// put on the new Node stays: clear it, so the Node takes pods.
	node.Spec.Taints = nil
	node.Labels = labels
	must(t, m.client.Update(ctx, node))
	return node
}
