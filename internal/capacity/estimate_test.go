package capacity

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEstimateFollowsEveryChange replays random pod events and node changes
// into a Usage, the way the member cache's informers do (the store first,
// then the handler), and checks after each that the remembered estimate of
// every template is the one Fit computes from nodes and pods as they are:
// no change an estimate reads leaves a remembered one behind.
func TestEstimateFollowsEveryChange(t *testing.T) {
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded}
	cpus := []string{"", "250m", "1"}
	specs := []*corev1.PodSpec{template("200m", "256Mi"), template("200m", "256Mi"), template("1", ""),
		{NodeSelector: map[string]string{"zone": "b"}, Containers: []corev1.Container{container("100m", "")}},
		{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}, Containers: []corev1.Container{container("100m", "")}}}
	nodeChanges := []func(*corev1.Node){notReady, cordoned, tainted("dedicated", corev1.TaintEffectNoSchedule),
		labelled("zone", "b"), func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1") }}
	for seed := uint64(1); seed <= 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		u := NewUsage()
		nodes := []corev1.Node{mkNode("a", "4", "8Gi", 10), mkNode("b", "2", "4Gi", 5)}
		pods := map[string]corev1.Pod{}
		for step := range 200 {
			switch name := fmt.Sprintf("p%d", rng.IntN(8)); {
			case rng.IntN(4) == 0:
				// A node changes what an estimate reads, or comes back as it was.
				i := rng.IntN(len(nodes))
				old := nodes[i]
				cur := mkNode(old.Name, "4", "8Gi", 10)
				if rng.IntN(2) == 0 {
					nodeChanges[rng.IntN(len(nodeChanges))](&cur)
				}
				nodes[i] = cur
				if NodeFitChanged(&old, &cur) {
					u.NodesChanged()
				}
			default:
				old, exists := pods[name]
				p := boundPod([]string{"", "a", "b"}[rng.IntN(3)], phases[rng.IntN(len(phases))], cpus[rng.IntN(len(cpus))], "64Mi")
				pods[name] = p
				if exists {
					u.Update(cached(&old), cached(&p))
				} else {
					u.Add(cached(&p))
				}
			}
			list := make([]corev1.Pod, 0, len(pods))
			for _, p := range pods {
				list = append(list, p)
			}
			for i, spec := range specs {
				got, err := u.Estimate(spec, func() ([]*corev1.Node, error) { return pointersTo(nodes), nil })
				if err != nil {
					t.Fatal(err)
				}
				if exp := Fit(nodes, list, spec); got.Replicas != exp.Replicas || got.EligibleNodes != exp.EligibleNodes || !equality.Semantic.DeepEqual(got.Free, exp.Free) {
					t.Fatalf("seed %d step %d spec %d: remembered estimate %d replicas on %d nodes, free %v; Fit %d on %d, free %v",
						seed, step, i, got.Replicas, got.EligibleNodes, got.Free, exp.Replicas, exp.EligibleNodes, exp.Free)
				}
			}
		}
	}
}

// TestEstimateIsMadeOncePerChange: between two changes, templates that ask
// the same of a node share one estimate (the nodes are listed once), a
// status-only pod update or a node heartbeat keeps it, and a listing error
// is returned and not remembered.
func TestEstimateIsMadeOncePerChange(t *testing.T) {
	nodes := []corev1.Node{mkNode("a", "4", "8Gi", 10)}
	listed := 0
	list := func() ([]*corev1.Node, error) { listed++; return pointersTo(nodes), nil }
	u := NewUsage()
	estimate := func(spec *corev1.PodSpec) Estimate {
		t.Helper()
		est, err := u.Estimate(spec, list)
		if err != nil {
			t.Fatal(err)
		}
		return est
	}
	wantListed := func(want int, after string) {
		t.Helper()
		if listed != want {
			t.Fatalf("after %s: nodes listed %d times, want %d", after, listed, want)
		}
	}
	same := template("200m", "256Mi")
	sameAgain := template("200m", "256Mi")
	sameAgain.Containers[0].Image = "registry.example/other:2" // not read by an estimate
	if a, b := estimate(same), estimate(sameAgain); a.Replicas != 10 || b.Replicas != 10 {
		t.Fatalf("estimates %d and %d, want 10", a.Replicas, b.Replicas)
	}
	wantListed(1, "two templates asking the same")
	estimate(template("300m", "256Mi"))
	wantListed(2, "a template asking more cpu")

	pending := boundPod("a", corev1.PodPending, "1", "1Gi")
	u.Add(cached(&pending))
	if got := estimate(same); got.Replicas != 9 {
		t.Fatalf("after a pod bound: %d replicas, want 9", got.Replicas)
	}
	wantListed(3, "a pod taking room")
	running := pending
	running.Status.Phase = corev1.PodRunning
	u.Update(cached(&pending), cached(&running))
	estimate(same)
	wantListed(3, "a pod turning Running on the same node")

	heartbeat := nodes[0].DeepCopy()
	heartbeat.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now())
	heartbeat.ResourceVersion = "2"
	if NodeFitChanged(&nodes[0], heartbeat) {
		t.Fatal("a node heartbeat counted as a change an estimate reads")
	}
	cordonedNode := nodes[0].DeepCopy()
	cordoned(cordonedNode)
	if !NodeFitChanged(&nodes[0], cordonedNode) {
		t.Fatal("a cordon not counted as a change an estimate reads")
	}
	nodes[0] = *cordonedNode
	u.NodesChanged()
	if got := estimate(same); got.Replicas != 0 {
		t.Fatalf("after the node was cordoned: %d replicas, want 0", got.Replicas)
	}
	wantListed(4, "a node change")

	u.NodesChanged()
	broken := errors.New("cache stopped")
	if _, err := u.Estimate(same, func() ([]*corev1.Node, error) { return nil, broken }); !errors.Is(err, broken) {
		t.Fatalf("listing error: got %v, want %v", err, broken)
	}
	estimate(same)
	wantListed(5, "a failed listing (not remembered)")
}

// BenchmarkEstimateGoalMemberRemembered is an RSP's estimate of a member at
// the scale goal when another RSP with the same template was planned since
// the last change (BenchmarkUsageFitGoalMember is the walk it saves).
func BenchmarkEstimateGoalMemberRemembered(b *testing.B) {
	nodes, pods := goalMember()
	u := NewUsage()
	for i := range pods {
		u.Add(cached(&pods[i]))
	}
	ptrs := pointersTo(nodes)
	list := func() ([]*corev1.Node, error) { return ptrs, nil }
	spec := template("200m", "256Mi")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := u.Estimate(spec, list); err != nil {
			b.Fatal(err)
		}
	}
}
