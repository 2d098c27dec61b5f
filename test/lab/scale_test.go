package lab

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestFederatedDeploymentsYAMLOneNamespace(t *testing.T) {
	doc := FederatedDeploymentsYAML("scale", "web", 3, 2, []string{"member1", "member2"})
	kinds := map[string]int{}
	for _, part := range strings.Split(doc, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(part), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		kinds[obj["kind"].(string)]++
	}
	want := map[string]int{"Namespace": 1, "FederatedNamespace": 1, "FederatedDeployment": 3, "ReplicaSchedulingPreference": 3}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s, want %d (all kinds: %v)", kinds[k], k, n, kinds)
		}
	}
}

func TestScaleKwokProcArgs(t *testing.T) {
	l := &Lab{opts: Options{BinDir: "/bin", NodeLeaseSeconds: 8}}
	c := &ClusterState{Name: "member2", Index: 2, Dir: "/lab/member2", Kubeconfig: "/lab/member2/kubeconfig"}
	a := l.scaleKwokProc(c, 1, "/lab/member2/scale.yaml", 40)
	b := l.scaleKwokProc(c, 2, "/lab/member2/scale.yaml", 40)
	args := strings.Join(a.Args, " ")
	for _, want := range []string{"--config=/lab/member2/scale.yaml", "--node-lease-duration-seconds=40",
		"--manage-nodes-with-label-selector=" + FailureDomainLabel + "=bulk-1"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if a.Key() == b.Key() || strings.Join(a.Args, " ") == strings.Join(b.Args, " ") {
		t.Error("two kwok processes of one member share a key or their pod CIDR")
	}
}
