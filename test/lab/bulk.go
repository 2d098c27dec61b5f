package lab

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BulkDomain is the failure domain of nodes added by AddBulkNodes: they share
// one kwok process because thousands of processes would not fit the machine.
const BulkDomain = "bulk"

// AddBulkNodes adds count kwok nodes (named <cluster>-bulk-<i>, continuing
// after the bulk nodes that already exist) to a member, for scale benchmarks.
// They are not part of the lab's failure-injection state and have no Machines.
// It returns the names of all bulk nodes of the member.
func (l *Lab) AddBulkNodes(ctx context.Context, cluster string, count int) ([]string, error) {
	st, err := l.State()
	if err != nil {
		return nil, err
	}
	c := st.Cluster(cluster)
	if c == nil || c.Role != RoleMember {
		return nil, fmt.Errorf("no member %q in the lab", cluster)
	}
	cl, err := l.Client(cluster)
	if err != nil {
		return nil, err
	}
	var existing corev1.NodeList
	if err := cl.List(ctx, &existing, client.MatchingLabels{FailureDomainLabel: BulkDomain}); err != nil {
		return nil, err
	}
	first := len(existing.Items)
	names := make([]string, 0, first+count)
	for _, n := range existing.Items {
		names = append(names, n.Name)
	}
	var added []string
	for i := first; i < first+count; i++ {
		added = append(added, fmt.Sprintf("%s-bulk-%d", cluster, i))
	}
	err = forEachParallel(ctx, added, 16, func(ctx context.Context, name string) error {
		node := l.nodeObject(c, NodeState{Name: name, Zone: c.Name + "-bulk"})
		node.Labels[FailureDomainLabel] = BulkDomain
		return createNodeObject(ctx, cl, c.Name, node)
	})
	if err != nil {
		return nil, err
	}
	if st.Proc(kwokKey(cluster, BulkDomain)) == nil {
		p := l.kwokProc(c, BulkDomain, 0)
		// Bulk pods need far more addresses than a per-node /24.
		for i, a := range p.Args {
			switch {
			case len(a) > 7 && a[:7] == "--cidr=":
				p.Args[i] = fmt.Sprintf("--cidr=10.%d.0.0/16", 100+c.Index)
			case len(a) > 10 && a[:10] == "--node-ip=":
				p.Args[i] = fmt.Sprintf("--node-ip=192.168.%d.250", c.Index)
			}
		}
		if err := l.launch(ctx, p, nil); err != nil {
			return nil, err
		}
	}
	return append(names, added...), nil
}

// CreateBulkPods binds perNode pods directly (no scheduler) to each node, in
// namespace ns, as a scale benchmark's cached pod population.
func (l *Lab) CreateBulkPods(ctx context.Context, cluster, ns string, nodes []string, perNode int) error {
	cl, err := l.Client(cluster)
	if err != nil {
		return err
	}
	if err := createIgnoreExists(ctx, cl, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	type slot struct {
		node string
		i    int
	}
	var slots []slot
	for _, n := range nodes {
		for i := 0; i < perNode; i++ {
			slots = append(slots, slot{n, i})
		}
	}
	return forEachParallel(ctx, slots, 32, func(ctx context.Context, s slot) error {
		node, j := s.node, s.i
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", node, j), Namespace: ns,
				Labels: map[string]string{"app": "bench", "bench.fedfailover.io/node": node},
			},
			Spec: corev1.PodSpec{
				NodeName: node,
				Containers: []corev1.Container{{
					Name: "app", Image: "registry.example/bench:1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					}},
				}},
				Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			},
		}
		if err := cl.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		return nil
	})
}

// forEachParallel runs fn on every item with at most workers at a time and
// returns the first error.
func forEachParallel[T any](ctx context.Context, items []T, workers int, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan T)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range work {
				if err := fn(ctx, it); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for _, it := range items {
		select {
		case work <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return first
}
