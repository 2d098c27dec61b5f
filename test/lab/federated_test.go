package lab

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestFederatedDeploymentYAML(t *testing.T) {
	docs := strings.Split(FederatedDeploymentYAML("web", "shop", 7, []string{"member1", "member2", "member3"}), "\n---\n")
	wantKinds := []string{"Namespace", "FederatedNamespace", "FederatedDeployment", "ReplicaSchedulingPreference"}
	if len(docs) != len(wantKinds) {
		t.Fatalf("%d documents, want %d", len(docs), len(wantKinds))
	}
	objs := make([]map[string]any, len(docs))
	for i, d := range docs {
		if err := yaml.Unmarshal([]byte(d), &objs[i]); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, d)
		}
		if objs[i]["kind"] != wantKinds[i] {
			t.Errorf("document %d kind %v, want %s", i, objs[i]["kind"], wantKinds[i])
		}
	}
	placement := objs[2]["spec"].(map[string]any)["placement"].(map[string]any)["clusters"].([]any)
	if len(placement) != 3 || placement[2].(map[string]any)["name"] != "member3" {
		t.Errorf("placement %v, want the three members", placement)
	}
	rsp := objs[3]["spec"].(map[string]any)
	if rsp["totalReplicas"] != float64(7) || rsp["targetKind"] != "FederatedDeployment" {
		t.Errorf("RSP spec %v", rsp)
	}
	clusters := rsp["clusters"].(map[string]any)
	if len(clusters) != 3 || clusters["member2"].(map[string]any)["weight"] != float64(1) {
		t.Errorf("RSP clusters %v, want weight 1 each", clusters)
	}
}
