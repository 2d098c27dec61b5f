package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type nodeOpt func(*corev1.Node)

func mkNode(name, cpu, mem string, pods int64, opts ...nodeOpt) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}}}
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func notReady(n *corev1.Node)        { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
func cordoned(n *corev1.Node)        { n.Spec.Unschedulable = true }
func noReady(n *corev1.Node)         { n.Status.Conditions = nil }
func withoutPodLimit(n *corev1.Node) { delete(n.Status.Allocatable, corev1.ResourcePods) }
func tainted(key string, effect corev1.TaintEffect) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "x", Effect: effect})
	}
}
func labelled(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }

func container(cpu, mem string) corev1.Container {
	req := corev1.ResourceList{}
	if cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		req[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}
}

func template(cpu, mem string) *corev1.PodSpec {
	return &corev1.PodSpec{Containers: []corev1.Container{container(cpu, mem)}}
}

func boundPod(node string, phase corev1.PodPhase, cpu, mem string) corev1.Pod {
	return corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{container(cpu, mem)}}, Status: corev1.PodStatus{Phase: phase}}
}

func TestFit(t *testing.T) {
	tolerateAll := func(s *corev1.PodSpec) *corev1.PodSpec {
		s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		return s
	}
	tests := []struct {
		name         string
		nodes        []corev1.Node
		pods         []corev1.Pod
		spec         *corev1.PodSpec
		want         int64
		wantEligible int
	}{
		{name: "cpu bound", nodes: []corev1.Node{mkNode("n1", "4", "64Gi", 110)}, spec: template("1500m", "1Gi"), want: 2, wantEligible: 1},
		{name: "memory bound", nodes: []corev1.Node{mkNode("n1", "64", "4Gi", 110)}, spec: template("100m", "1Gi"), want: 4, wantEligible: 1},
		{name: "sums nodes", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110), mkNode("n2", "2", "8Gi", 110)}, spec: template("1", "1Gi"), want: 6, wantEligible: 2},
		{name: "running pods use room", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110)},
			pods: []corev1.Pod{boundPod("n1", corev1.PodRunning, "2", "1Gi"), boundPod("n1", corev1.PodPending, "1", "1Gi")},
			spec: template("1", "1Gi"), want: 1, wantEligible: 1},
		{name: "terminal pods ignored", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110)},
			pods: []corev1.Pod{boundPod("n1", corev1.PodSucceeded, "2", "1Gi"), boundPod("n1", corev1.PodFailed, "2", "1Gi")},
			spec: template("1", "1Gi"), want: 4, wantEligible: 1},
		{name: "unbound pods ignored", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110)},
			pods: []corev1.Pod{boundPod("", corev1.PodPending, "4", "1Gi")}, spec: template("1", "1Gi"), want: 4, wantEligible: 1},
		{name: "pods on other nodes ignored", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110)},
			pods: []corev1.Pod{boundPod("gone", corev1.PodRunning, "4", "1Gi")}, spec: template("1", "1Gi"), want: 4, wantEligible: 1},
		{name: "pod count limit", nodes: []corev1.Node{mkNode("n1", "64", "64Gi", 3)},
			pods: []corev1.Pod{boundPod("n1", corev1.PodRunning, "", "")}, spec: template("100m", "1Mi"), want: 2, wantEligible: 1},
		{name: "no requests: only pod count", nodes: []corev1.Node{mkNode("n1", "1", "1Gi", 5)}, spec: &corev1.PodSpec{}, want: 5, wantEligible: 1},
		{name: "no pods allocatable fits nothing", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, withoutPodLimit)}, spec: template("1", "1Gi"), want: 0, wantEligible: 1},
		{name: "overcommitted node fits nothing", nodes: []corev1.Node{mkNode("n1", "1", "1Gi", 110)},
			pods: []corev1.Pod{boundPod("n1", corev1.PodRunning, "2", "2Gi")}, spec: template("100m", "1Mi"), want: 0, wantEligible: 1},
		{name: "not ready", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, notReady), mkNode("n2", "4", "8Gi", 110, noReady)}, spec: template("1", "1Gi"), want: 0},
		{name: "cordoned", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, cordoned)}, spec: template("1", "1Gi"), want: 0},
		{name: "cordoned but tolerated", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, cordoned)}, spec: tolerateAll(template("1", "1Gi")), want: 4, wantEligible: 1},
		{name: "NoSchedule taint", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, tainted("gpu", corev1.TaintEffectNoSchedule))}, spec: template("1", "1Gi"), want: 0},
		{name: "NoExecute taint", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, tainted("gpu", corev1.TaintEffectNoExecute))}, spec: template("1", "1Gi"), want: 0},
		{name: "PreferNoSchedule taint does not block", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, tainted("gpu", corev1.TaintEffectPreferNoSchedule))}, spec: template("1", "1Gi"), want: 4, wantEligible: 1},
		{name: "taint tolerated by key and value", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, tainted("gpu", corev1.TaintEffectNoSchedule))},
			spec: func() *corev1.PodSpec {
				s := template("1", "1Gi")
				s.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}}
				return s
			}(), want: 4, wantEligible: 1},
		{name: "toleration with the wrong value", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, tainted("gpu", corev1.TaintEffectNoSchedule))},
			spec: func() *corev1.PodSpec {
				s := template("1", "1Gi")
				s.Tolerations = []corev1.Toleration{{Key: "gpu", Value: "y"}}
				return s
			}(), want: 0},
		{name: "toleration for NoSchedule only leaves NoExecute blocking",
			nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, tainted("gpu", corev1.TaintEffectNoSchedule), tainted("gpu", corev1.TaintEffectNoExecute))},
			spec: func() *corev1.PodSpec {
				s := template("1", "1Gi")
				s.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
				return s
			}(), want: 0},
		{name: "nodeSelector", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, labelled("disk", "ssd")), mkNode("n2", "4", "8Gi", 110)},
			spec: func() *corev1.PodSpec {
				s := template("1", "1Gi")
				s.NodeSelector = map[string]string{"disk": "ssd"}
				return s
			}(),
			want: 4, wantEligible: 1},
		{name: "required node affinity", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110, labelled("zone", "b")), mkNode("n2", "4", "8Gi", 110)},
			spec: func() *corev1.PodSpec {
				s := template("1", "1Gi")
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"b", "c"}}}},
						{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n9"}}}},
					}}}}
				return s
			}(), want: 4, wantEligible: 1},
		{name: "extended resource missing on node", nodes: []corev1.Node{mkNode("n1", "4", "8Gi", 110)},
			spec: func() *corev1.PodSpec {
				s := template("1", "1Gi")
				s.Containers[0].Resources.Requests["example.com/gpu"] = resource.MustParse("1")
				return s
			}(), want: 0, wantEligible: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Fit(tt.nodes, tt.pods, tt.spec)
			if got.Replicas != tt.want || got.EligibleNodes != tt.wantEligible {
				t.Fatalf("Fit = %d replicas on %d nodes, want %d on %d (ineligible %v)", got.Replicas, got.EligibleNodes, tt.want, tt.wantEligible, got.Ineligible)
			}
		})
	}
}

func TestFitFree(t *testing.T) {
	nodes := []corev1.Node{mkNode("n1", "4", "8Gi", 10), mkNode("n2", "2", "4Gi", 10), mkNode("n3", "8", "8Gi", 10, notReady)}
	pods := []corev1.Pod{boundPod("n1", corev1.PodRunning, "1", "2Gi"), boundPod("n3", corev1.PodRunning, "1", "1Gi")}
	got := Fit(nodes, pods, template("1", "1Gi"))
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "5", corev1.ResourceMemory: "10Gi", corev1.ResourcePods: "19"}
	for name, w := range want {
		q := got.Free[name]
		if q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("free %s = %s, want %s", name, q.String(), w)
		}
	}
	if got.Ineligible["NotReady"] != 1 {
		t.Errorf("ineligible = %v", got.Ineligible)
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("500m", "100Mi")
	sidecar.RestartPolicy = &always
	tests := []struct {
		name    string
		spec    *corev1.PodSpec
		wantCPU string
		wantMem string
	}{
		{"nil", nil, "0", "0"},
		{"containers add up", &corev1.PodSpec{Containers: []corev1.Container{container("1", "1Gi"), container("500m", "")}}, "1500m", "1Gi"},
		{"init container peak wins", &corev1.PodSpec{InitContainers: []corev1.Container{container("3", "10Mi")}, Containers: []corev1.Container{container("1", "1Gi")}}, "3", "1Gi"},
		{"sidecar adds to containers and later inits", &corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar, container("2", "10Mi")},
			Containers:     []corev1.Container{container("1", "1Gi")}}, "2500m", "1124Mi"},
		{"overhead added", &corev1.PodSpec{Containers: []corev1.Container{container("1", "1Gi")},
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}, "1250m", "1Gi"},
		{"pod-level requests replace", &corev1.PodSpec{Containers: []corev1.Container{container("1", "1Gi")},
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}, "2", "1Gi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodRequests(tt.spec)
			cpu, mem := got[corev1.ResourceCPU], got[corev1.ResourceMemory]
			if cpu.Cmp(resource.MustParse(tt.wantCPU)) != 0 || mem.Cmp(resource.MustParse(tt.wantMem)) != 0 {
				t.Fatalf("requests cpu=%s mem=%s, want %s %s", cpu.String(), mem.String(), tt.wantCPU, tt.wantMem)
			}
		})
	}
}
