package member

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedfailover/fedfailover/test/testenv"
)

// End-to-end budgets of the member cache, measured by
// TestMemberCacheMemoryEndToEnd: the heap a production connection (dial:
// its informers, transforms, namespace index and pod usage sums) holds once
// synced, per 10,000 pods and per node, over a real API server. Measured
// (Go 1.26, k8s.io/api v0.37, 10,000 pods on 2,000 nodes), live heap: 6.9
// MB per 10,000 pods (690 B a pod) since the cache keeps a cachedpod.Pod
// (352 B) in place of the typed Pod (1,280 B); 16.3 MB before, 19.6 MB
// before pod conditions lost their times and transforms worked in place.
// 2,555 B per node. The budgets leave about 8-10%: they are paid 6 times at
// the goal size (60,000 pods).
const (
	cachePodsBudgetMB    = 7.6
	cacheNodeBytesBudget = 2750
)

var memHeapProfile = flag.String("member-cache-heap-profile", "",
	"write a heap profile of the synced member cache (pods and nodes) to this file")

// TestMemberCacheMemoryEndToEnd creates memNodes Nodes and memPods Pods in a
// real API server, shaped as the kubelet and the controllers write them
// (memberNode, deploymentPod: labels, annotations, owner references, two
// containers, volumes, full status), dials the member with the production
// constructor and reports the heap the synced connection holds (live bytes
// and in-use spans after GC, deltas from just before the dial): first with
// the Nodes only, then with the Pods too. Figures are printed with -v.
func TestMemberCacheMemoryEndToEnd(t *testing.T) {
	cfg := testenv.Start(t)
	ctx := context.Background()
	writer := rest.CopyConfig(cfg)
	writer.QPS, writer.Burst = -1, 0 // no client-side rate limit: 24,000 writes
	c, err := client.New(writer, client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}

	empty := cacheHeap(t, cfg, "")
	createAll(t, memNodes, func(i int) error {
		n := memberNode(i)
		status := n.Status
		n.ResourceVersion, n.UID, n.ManagedFields, n.Status = "", "", nil, corev1.NodeStatus{}
		if err := c.Create(ctx, n, client.FieldOwner("kubelet")); err != nil {
			return err
		}
		n.Status = status
		return c.Status().Update(ctx, n, client.FieldOwner("kubelet"))
	})
	nodes := cacheHeap(t, cfg, "")

	for i := range 20 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%d", i)}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	createAll(t, memPods, func(i int) error {
		p := deploymentPod(i)
		status := p.Status
		p.ResourceVersion, p.UID, p.ManagedFields, p.Status = "", "", nil, corev1.PodStatus{}
		if err := c.Create(ctx, p, client.FieldOwner("kube-controller-manager")); err != nil {
			return err
		}
		p.Status = status
		return c.Status().Update(ctx, p, client.FieldOwner("kubelet"))
	})
	all := cacheHeap(t, cfg, *memHeapProfile)

	perNode := float64(nodes.live-empty.live) / memNodes
	perNodeInuse := float64(nodes.inuse-empty.inuse) / memNodes
	podsMB := float64(all.live-nodes.live) / 1e6 * 10000 / memPods
	podsInuseMB := float64(all.inuse-nodes.inuse) / 1e6 * 10000 / memPods
	t.Logf("connection without objects: %.1f MB live, %.1f MB in use", float64(empty.live)/1e6, float64(empty.inuse)/1e6)
	t.Logf("per node: %.0f B live, %.0f B in use (budget %d B live)", perNode, perNodeInuse, cacheNodeBytesBudget)
	t.Logf("per pod: %.0f B live, %.0f B in use", podsMB*100, podsInuseMB*100)
	t.Logf("per 10,000 pods: %.1f MB live, %.1f MB in use (budget %.1f MB live); with one node per 10 pods: %.1f MB live",
		podsMB, podsInuseMB, cachePodsBudgetMB, podsMB+perNode*1000/1e6)
	if podsMB > cachePodsBudgetMB {
		t.Errorf("the member cache holds %.1f MB per 10,000 pods, budget %.1f MB", podsMB, cachePodsBudgetMB)
	}
	if perNode > cacheNodeBytesBudget {
		t.Errorf("the member cache holds %.0f B per node, budget %d B", perNode, cacheNodeBytesBudget)
	}
}

// heapDelta is what a synced connection added to the heap after GC: live
// bytes (HeapAlloc) and the spans holding them (HeapInuse).
type heapDelta struct{ live, inuse int64 }

// cacheHeap dials the member at cfg, waits for its cache to sync and
// returns the heap it holds, then stops it. The shared values start empty,
// as in a fresh process, and count with the connection.
func cacheHeap(t *testing.T, cfg *rest.Config, profile string) heapDelta {
	t.Helper()
	resetShared()
	if profile != "" {
		// Every allocation of this connection, for an exact profile.
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1
	}
	before := memStatsAfterGC()
	synced := make(chan struct{})
	conn, err := dial(context.Background(), rest.CopyConfig(cfg), clientgoscheme.Scheme, Options{}.withDefaults(),
		newWriteFence("m", func() bool { return true }, 0), newDenials(time.Now, nil), func() { close(synced) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.stop()
		<-conn.done
	}()
	select {
	case <-synced:
	case <-time.After(5 * time.Minute):
		t.Fatal("member cache not synced after 5 min")
	}
	after := memStatsAfterGC()
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			t.Fatal(err)
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	runtime.KeepAlive(conn)
	return heapDelta{live: int64(after.HeapAlloc) - int64(before.HeapAlloc), inuse: int64(after.HeapInuse) - int64(before.HeapInuse)}
}

func memStatsAfterGC() runtime.MemStats {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m
}

// createAll runs create for 0..n-1 with a few workers; the first error
// fails the test.
func createAll(t *testing.T, n int, create func(i int) error) {
	t.Helper()
	const workers = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		first   error
		indexes = make(chan int)
	)
	for range workers {
		wg.Go(func() {
			for i := range indexes {
				if err := create(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("object %d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		indexes <- i
	}
	close(indexes)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}
