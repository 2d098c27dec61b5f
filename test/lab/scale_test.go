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
