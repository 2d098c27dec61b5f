package capacity

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/fedfailover/fedfailover/internal/cachedpod"
)

// TestUsageAgreesWithFit replays random pod events (bind, finish, move,
// delete, with fractional requests) into a Usage and checks after each one
// that its estimate is the one Fit computes from the pods as they are.
func TestUsageAgreesWithFit(t *testing.T) {
	nodes := []corev1.Node{mkNode("a", "4", "8Gi", 10), mkNode("b", "2", "4Gi", 5), mkNode("c", "8", "16Gi", 110)}
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}
	cpus := []string{"", "100m", "250m", "1", "1500m"}
	mems := []string{"", "64Mi", "1Gi", "300M"}
	want := template("200m", "256Mi")
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		u := NewUsage()
		pods := map[string]corev1.Pod{}
		draw := func() corev1.Pod {
			node := []string{"", "a", "b", "c", "gone"}[rng.IntN(5)]
			return boundPod(node, phases[rng.IntN(len(phases))], cpus[rng.IntN(len(cpus))], mems[rng.IntN(len(mems))])
		}
		for step := range 300 {
			name := fmt.Sprintf("p%d", rng.IntN(12))
			old, exists := pods[name]
			switch {
			case !exists:
				p := draw()
				pods[name] = p
				u.Add(cached(&p))
			case rng.IntN(4) == 0:
				delete(pods, name)
				u.Delete(cached(&old))
			default:
				p := draw()
				pods[name] = p
				u.Update(cached(&old), cached(&p))
			}
			list := make([]corev1.Pod, 0, len(pods))
			for _, p := range pods {
				list = append(list, p)
			}
			got, exp := u.Fit(pointersTo(nodes), want), Fit(nodes, list, want)
			if got.Replicas != exp.Replicas || got.EligibleNodes != exp.EligibleNodes || !equality.Semantic.DeepEqual(got.Free, exp.Free) {
				t.Fatalf("seed %d step %d: Usage %d replicas, free %v; Fit %d, free %v", seed, step, got.Replicas, got.Free, exp.Replicas, exp.Free)
			}
		}
		if len(pods) == 0 && len(u.byNode) != 0 {
			t.Fatalf("seed %d: no pods left but usage on %d nodes", seed, len(u.byNode))
		}
	}
}

// TestUsageForgetsANodeWhosePodsWent: usage on a node that is gone must not
// stay behind (nor leak) once its pods are deleted.
func TestUsageForgetsANodeWhosePodsWent(t *testing.T) {
	u := NewUsage()
	p := boundPod("gone", corev1.PodRunning, "1", "1Gi")
	u.Add(cached(&p))
	if len(u.byNode) != 1 {
		t.Fatalf("usage on %d nodes after one pod, want 1", len(u.byNode))
	}
	u.Delete(cached(&p))
	if len(u.byNode) != 0 {
		t.Fatalf("usage on %d nodes after the pod went, want 0", len(u.byNode))
	}
}

func pointersTo(nodes []corev1.Node) []*corev1.Node {
	out := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		out[i] = &nodes[i]
	}
	return out
}

// goalMember is one member at the scale goal: 2,000 nodes, 10 pods each.
func goalMember() ([]corev1.Node, []corev1.Pod) {
	nodes := make([]corev1.Node, 2000)
	pods := make([]corev1.Pod, 0, 20000)
	for i := range nodes {
		nodes[i] = mkNode(fmt.Sprintf("n%d", i), "32", "256Gi", 110)
		for range 10 {
			pods = append(pods, boundPod(nodes[i].Name, corev1.PodRunning, "100m", "128Mi"))
		}
	}
	return nodes, pods
}

// BenchmarkFitGoalMember is the estimate walking every pod (Fit).
func BenchmarkFitGoalMember(b *testing.B) {
	nodes, pods := goalMember()
	spec := template("200m", "256Mi")
	b.ReportAllocs()
	for b.Loop() {
		Fit(nodes, pods, spec)
	}
}

// BenchmarkUsageFitGoalMember is the estimate from a kept Usage.
func BenchmarkUsageFitGoalMember(b *testing.B) {
	nodes, pods := goalMember()
	u := NewUsage()
	for i := range pods {
		u.Add(cached(&pods[i]))
	}
	ptrs := pointersTo(nodes)
	spec := template("200m", "256Mi")
	b.ReportAllocs()
	for b.Loop() {
		u.Fit(ptrs, spec)
	}
}

// cached is p as a member cache keeps it, for what Usage reads: node,
// phase and the effective requests.
func cached(p *corev1.Pod) *cachedpod.Pod {
	return &cachedpod.Pod{NodeName: p.Spec.NodeName, Phase: p.Status.Phase,
		Requests: &corev1.ResourceRequirements{Requests: PodRequests(&p.Spec)}}
}
