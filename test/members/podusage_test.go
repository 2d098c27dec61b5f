package members

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	f := env(t)
	m := f.members["alpha"]
	ctx := context.Background()
	node := schedulableNode(t, m, "alpha-estimate", map[string]string{"estimate-test": "only-this-node"})
	// Only this node is eligible: 4 cores, 500m each.
	spec := &corev1.PodSpec{NodeSelector: node.Labels, Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}}

	h := startManager(t, f, testOptions())
	f.join(t, "alpha", "alpha", nil)
	h.waitState(t, 10*time.Second, "alpha", true, member.ReasonConnected)
	listed := 0
	estimate := func() (capacity.Estimate, error) {
		usage, err := h.cache.PodUsage(ctx, "alpha")
		if err != nil {
			return capacity.Estimate{}, err
		}
		rd, err := h.cache.GetReader(ctx, "alpha")
		if err != nil {
			return capacity.Estimate{}, err
		}
		return usage.Estimate(spec, func() ([]*corev1.Node, error) {
			listed++
			var ptrs []*corev1.Node
			err := member.VisitCached(ctx, rd, "", func(n *corev1.Node) { ptrs = append(ptrs, n) })
			return ptrs, err
		})
	}
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
